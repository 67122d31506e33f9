import GRDB

/// The names a listing by name reads: those after the page token's position that start with a
/// prefix, as one range of the `(projectId, name)` index, so a page costs what it lists however
/// many names lie outside the prefix.
struct NameRange {
    /// The condition on `name`, with a `?` for each of `arguments`.
    let sql: String
    let arguments: StatementArguments

    /// - Parameters:
    ///   - prefix: `""` for every name.
    ///   - position: the previous page's last name, or `nil` for the first page.
    init(prefix: String, after position: String?, column: String = "name") {
        var conditions: [String] = []
        var values: [String] = []
        // Bytewise, as SQLite compares: Swift's `>=` on strings compares canonical equivalents.
        if let position, !position.utf8.lexicographicallyPrecedes(prefix.utf8) {
            conditions.append("\(column) > ?")
            values.append(position)
        } else {
            conditions.append("\(column) >= ?")
            values.append(prefix)
        }
        if !prefix.isEmpty {
            // SQLite compares text bytewise (UTF-8), so every name that starts with `prefix` is
            // below prefix + U+10FFFF, the largest scalar. A name that goes on from the prefix with
            // U+10FFFF itself, a noncharacter, is the one name left out.
            conditions.append("\(column) < ?")
            values.append(prefix + "\u{10FFFF}")
        }
        sql = conditions.joined(separator: " AND ")
        arguments = StatementArguments(values)
    }
}
