import Foundation

extension Duration {
    /// In seconds, as `Date` arithmetic (`TimeInterval`) and JSON want it.
    public var seconds: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// In whole nanoseconds, as NIO's `TimeAmount` and an atomic counter want it.
    public var nanoseconds: Int64 {
        components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
    }
}
