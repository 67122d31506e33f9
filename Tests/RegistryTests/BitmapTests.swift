import Registry
import RegistrySQLite
import Testing

@Suite("Bitmap")
struct BitmapTests {
    @Test("Set algebra, counting and paging agree with Set on random ids", arguments: UInt64(1)...8)
    func agreesWithSet(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let a = (0..<300).map { _ in UInt32(random.next() % 5000) }
        let b = (0..<300).map { _ in UInt32(random.next() % 7000) }
        var and = Bitmap(capacity: 5000, ids: a)
        and.formIntersection(Bitmap(capacity: 7000, ids: b))
        var or = Bitmap(capacity: 5000, ids: a)
        or.formUnion(Bitmap(capacity: 7000, ids: b))
        var minus = Bitmap(capacity: 5000, ids: a)
        minus.subtract(Bitmap(capacity: 7000, ids: b))
        #expect(and.count == Set(a).intersection(b).count)
        #expect(or.count == Set(a).union(b).count)
        #expect(minus.count == Set(a).subtracting(b).count)
        var paged: [UInt32] = []
        var after: UInt32?
        repeat {
            let page = or.ids(after: after, limit: 37)
            paged += page
            after = page.count == 37 ? page.last : nil
        } while after != nil
        #expect(paged == Set(a).union(b).sorted())
    }
}
