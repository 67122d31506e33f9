/// Token ids as the change feed and the message recipients store them: little-endian 32-bit
/// integers, four bytes each, in every store.
public enum TokenIDList {
    /// Token ids as little-endian 32-bit integers.
    public static func encode(_ ids: [UInt32]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(ids.count * 4)
        for id in ids {
            bytes.append(UInt8(truncatingIfNeeded: id))
            bytes.append(UInt8(truncatingIfNeeded: id >> 8))
            bytes.append(UInt8(truncatingIfNeeded: id >> 16))
            bytes.append(UInt8(truncatingIfNeeded: id >> 24))
        }
        return bytes
    }

    public static func decode(_ bytes: [UInt8]) -> [UInt32] {
        stride(from: 0, to: bytes.count - 3, by: 4).map { i in
            UInt32(bytes[i]) | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2]) << 16 | UInt32(bytes[i + 3]) << 24
        }
    }
}

/// What one request's writes changed, collected inside its transaction (or savepoint) and
/// written to the feed at its end, so that a request rolled back leaves no entry. Every store
/// keeps one per write.
public final class ChangeLog {
    public init() {}

    public private(set) var changes: [AudienceChange] = []

    /// Records a change, merging it into the previous one when both say the same of more tokens
    /// (a batch of new tokens is one `registered` entry, not a thousand).
    public func record(_ change: AudienceChange) {
        switch (changes.last, change) {
        case (.registered(let p, _), .registered(let q, let more)) where p == q:
            // Taken off the array first, so the token list is appended to in place.
            guard case .registered(_, var tokens) = changes.removeLast() else { return }
            tokens.append(contentsOf: more)
            changes.append(.registered(project: p, tokens: tokens))
        case (.unregistered(let p, _), .unregistered(let q, let more)) where p == q:
            guard case .unregistered(_, var tokens) = changes.removeLast() else { return }
            tokens.append(contentsOf: more)
            changes.append(.unregistered(project: p, tokens: tokens))
        case (.seen(let p, _, let day), .seen(let q, let more, let later)) where p == q && day == later:
            guard case .seen(_, var tokens, _) = changes.removeLast() else { return }
            tokens.append(contentsOf: more)
            changes.append(.seen(project: p, tokens: tokens, day: day))
        default:
            switch change {
            case .subscribed(_, _, let tokens), .unsubscribed(_, _, let tokens), .registered(_, let tokens),
                .unregistered(_, let tokens), .described(_, let tokens, _), .seen(_, let tokens, _):
                if tokens.isEmpty { return }
            case .reset: break
            }
            changes.append(change)
        }
    }
}
