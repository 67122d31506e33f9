/// The warnings a condition carries: the first `capacity` found, and a count of the rest.
///
/// A 64 KiB condition can draw thousands of warnings that all say the same thing; keeping a few and
/// counting the others bounds both the work (a warning past the cap is never built) and the size of
/// a report.
struct WarningList: Sendable {
    /// How many warnings are kept.
    private(set) var capacity: Int
    private(set) var kept: [Diagnostic] = []
    /// Warnings found but not kept.
    private(set) var omitted = 0

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// How many more warnings would be kept.
    var room: Int { max(0, capacity - kept.count) }

    /// Keeps the warning `make` builds if there is room; otherwise only counts it.
    mutating func append(_ make: () -> Diagnostic) {
        if kept.count < capacity {
            kept.append(make())
        } else {
            omitted += 1
        }
    }

    /// Counts `count` warnings that are not kept.
    mutating func omit(_ count: Int) {
        omitted += count
    }

    /// Holds back one place for a warning that comes later but must not be crowded out, giving up
    /// the last kept warning if the list is full.
    mutating func reserveOne() {
        capacity -= 1
        if kept.count > capacity {
            kept.removeLast()
            omitted += 1
        }
    }

    /// Fills the place `reserveOne` held back.
    mutating func appendReserved(_ warning: Diagnostic) {
        capacity += 1
        kept.append(warning)
    }
}
