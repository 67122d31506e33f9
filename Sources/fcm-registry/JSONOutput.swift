import Foundation

/// Prints a value as indented JSON on stdout, the output of every data command.
func printJSON(_ value: some Encodable) throws {
    print(try jsonText(value))
}

/// A value as the data commands print it: indented, keys sorted, slashes as they are, and an
/// empty array or object on one line (`[]`), where Foundation's encoder spreads it over three.
func jsonText(_ value: some Encodable) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .iso8601
    let text = String(decoding: try encoder.encode(value), as: UTF8.self)
    // A raw line break never occurs inside a JSON string (it is written `\n`): a bracket
    // followed by one and only blanks up to its partner is an empty array or object.
    return text.replacing(/\[\n\s*\]/, with: "[]").replacing(/\{\n\s*\}/, with: "{}")
}
