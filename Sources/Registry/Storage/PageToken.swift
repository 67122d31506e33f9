/// Where a listing goes on: the one page model of every native listing, over HTTP and in the CLI.
///
/// As in Google's AIP-158 and Stripe's cursors, the token is opaque: URL-safe base64 of the
/// listing's name and its position in that listing. A token is only good for the listing that
/// issued it; any other, or one that was edited, is refused as an invalid argument, never read as
/// a position somewhere else.
public struct PageToken: Sendable, Hashable {
    /// The listings that page.
    public enum Listing: String, Sendable {
        case groups, groupMembers, topics, topicsBySubscribers, topicSubscribers, messages, audience, deliveries, tokens,
            audit
    }

    public var listing: Listing
    /// Where the next page starts after: a name, a token, a message id, a token id.
    public var position: String

    public init(_ listing: Listing, after position: String) {
        self.listing = listing
        self.position = position
    }

    /// The token as callers see and send it.
    public var encoded: String {
        Base64URL.encode(Array("\(listing.rawValue):\(position)".utf8))
    }

    /// Reads a token that `listing` issued.
    /// - Throws: `RegistryError.invalidPageToken` when it is not one.
    public init(decoding text: String, for listing: Listing) throws(RegistryError) {
        guard text.utf8.count <= 16 << 10, let bytes = Base64URL.decode(text),
            let decoded = String(validating: bytes, as: UTF8.self),
            let colon = decoded.firstIndex(of: ":"), decoded[..<colon] == listing.rawValue
        else { throw .invalidPageToken }
        self.init(listing, after: String(decoded[decoded.index(after: colon)...]))
    }
}

/// A page asked for: how many entries, and the token of the previous page's end.
public struct PageRequest: Sendable, Hashable {
    /// `nil` for the listing's default; larger than its maximum is its maximum.
    public var size: Int?
    public var token: String?

    public init(size: Int? = nil, token: String? = nil) {
        self.size = size
        self.token = token
    }

    /// The position to continue after in `listing`, or `nil` for the first page.
    public func position(in listing: PageToken.Listing) throws(RegistryError) -> String? {
        guard let token, !token.isEmpty else { return nil }
        return try PageToken(decoding: token, for: listing).position
    }

    /// The token id to continue after in a listing of token ids (an audience), or `nil` for the
    /// first page.
    public func tokenID(in listing: PageToken.Listing) throws(RegistryError) -> UInt32? {
        guard let position = try position(in: listing) else { return nil }
        guard let id = UInt32(position) else { throw .invalidPageToken }
        return id
    }

    /// The entries to list: the size asked for, within `1...maximum`.
    public func size(default defaultSize: Int, maximum: Int) -> Int {
        guard let size, size > 0 else { return defaultSize }
        return min(size, maximum)
    }
}

extension Page {
    /// The token of the page after this one, `nil` on the last page.
    public func nextPageToken(_ listing: PageToken.Listing) -> String? {
        nextAfter.map { PageToken(listing, after: $0).encoded }
    }
}
