/// Small ordinals for the values one attribute takes, found from a value's UTF-8 bytes.
///
/// Start-up reads ten million rows with four attributes each but meets only the few values in use
/// (three platforms, a few hundred zones): a value already met costs a hash of its bytes and one
/// comparison, never a `String`. The table doubles as values arrive, so a project with many
/// distinct values costs linear work too.
struct ValueInterner {
    /// The values met, by ordinal.
    private(set) var values: [String] = []
    private var bytes: [[UInt8]] = []
    /// Open addressing: the ordinal in each slot, or -1; a power of two long, at most half full.
    private var slots = [Int32](repeating: -1, count: 16)

    /// The ordinal of the value spelled by `value`, given one if it is new.
    mutating func ordinal(of value: UnsafeRawBufferPointer) -> Int {
        let mask = slots.count - 1
        var slot = Self.hash(value) & mask
        while slots[slot] >= 0 {
            let candidate = Int(slots[slot])
            if bytes[candidate].withUnsafeBytes({ $0.elementsEqual(value) }) { return candidate }
            slot = (slot + 1) & mask
        }
        let ordinal = values.count
        values.append(String(decoding: value, as: UTF8.self))
        bytes.append(Array(value))
        slots[slot] = Int32(ordinal)
        if values.count * 2 > slots.count { grow() }
        return ordinal
    }

    /// The ordinal of `value`.
    mutating func ordinal(of value: String) -> Int {
        var value = value
        return value.withUTF8 { ordinal(of: UnsafeRawBufferPointer($0)) }
    }

    private mutating func grow() {
        slots = [Int32](repeating: -1, count: slots.count * 2)
        let mask = slots.count - 1
        for (ordinal, value) in bytes.enumerated() {
            var slot = value.withUnsafeBytes { Self.hash($0) } & mask
            while slots[slot] >= 0 { slot = (slot + 1) & mask }
            slots[slot] = Int32(ordinal)
        }
    }

    /// Swift's seeded hash of the bytes: values are the senders' own, so none can be chosen to collide.
    private static func hash(_ bytes: UnsafeRawBufferPointer) -> Int {
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        return hasher.finalize()
    }
}
