import Foundation

/// Milliseconds since 1970, the unit of every time column, in every store.
public enum EpochMilliseconds {
    public static func now() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }
    public static func date(_ milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
    public static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
    /// A span of time in the same unit: a lease, added to `now()`.
    public static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }
}
