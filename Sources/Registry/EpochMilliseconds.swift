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

    /// RFC 3339 in UTC with exactly the milliseconds the registry stores: the format style would
    /// truncate 0.352 s, held as 0.35199…, to `.351`, and a time read back and written again
    /// (an export, a `lastSeenAt` the console sends as it read it) would drift.
    public static func rfc3339(_ date: Date) -> String {
        let (seconds, fraction) = milliseconds(date).quotientAndRemainder(dividingBy: 1000)
        let (wholeSeconds, positiveFraction) = fraction < 0 ? (seconds - 1, fraction + 1000) : (seconds, fraction)
        let whole = Date(timeIntervalSince1970: TimeInterval(wholeSeconds)).formatted(Date.ISO8601FormatStyle())
        let digits = String(positiveFraction)
        return whole.dropLast() + "." + String(repeating: "0", count: 3 - digits.count) + digits + "Z"
    }
}
