import Foundation
import Testing

/// Keeps the command line's and the start-up's error wordings in FCMWire's one table
/// (`CommandWording`, `ConfigurationWording`): an error the command line (`Sources/fcm-registry`)
/// or the composition root (`Sources/RegistryApp`) builds takes no string literal of its own, only
/// a wording named from the table, or a literal that is nothing but one interpolation (`"\(error)"`,
/// another error's own words).
@Suite("Wording table")
struct WordingTableTests {
    /// The error types those targets build with a message.
    static let errorTypes = ["ValidationError", "CommandFailure", "ConfigurationError", "StoreError"]
    static let folders = ["Sources/fcm-registry", "Sources/RegistryApp"]

    @Test("no error in the command line or the composition root is worded outside the table")
    func errorsNameTheirWording() throws {
        var found: [String] = []
        for folder in Self.folders {
            let root = repositoryRoot.appendingPathComponent(folder)
            let files = try #require(FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil))
                .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }
            for file in files {
                let text = try String(contentsOf: file, encoding: .utf8)
                for line in Self.wordedErrors(in: text) {
                    found.append("\(folder)/\(file.lastPathComponent):\(line)")
                }
            }
        }
        #expect(
            found.isEmpty, "error wordings outside FCMWire's table (CommandWording, ConfigurationWording): \(found)")
    }

    @Test("the scan finds a literal in an error's arguments and lets named wordings through")
    func scanFindsLiterals() {
        #expect(Self.wordedErrors(in: #"throw ValidationError("no such thing")"#) == [1])
        #expect(Self.wordedErrors(in: "let a = 1\nthrow CommandFailure(\n    \"cannot \\(path)\", status: 2)") == [2])
        #expect(Self.wordedErrors(in: #"throw ConfigurationError(description: Words.make(reason: "x \(e)"))"#) == [1])
        #expect(Self.wordedErrors(in: #"throw StoreError(location: "a", reason: "\(error)")"#) == [1])
        #expect(Self.wordedErrors(in: #"throw ValidationError(CommandWording.noGroupNamed(name))"#).isEmpty)
        #expect(Self.wordedErrors(in: #"throw StoreError(location: url.description, reason: "\(error)")"#).isEmpty)
        #expect(Self.wordedErrors(in: #"throw StoreError(location: l, reason: "\(String(reflecting: e))")"#).isEmpty)
        #expect(Self.wordedErrors(in: #"// throw ValidationError("in a comment")"#).isEmpty)
        let multiLine = "let h = \"\"\"\n  ValidationError(\"x\")\n  \"\"\"\nthrow ValidationError(\"y\")"
        #expect(Self.wordedErrors(in: multiLine) == [4])
        #expect(Self.wordedErrors(in: #"case let error as ValidationError: print("x")"#).isEmpty)
    }

    /// The lines (from 1) where one of `errorTypes` is built with a string literal among its
    /// arguments that is more than one interpolation.
    static func wordedErrors(in text: String) -> [Int] {
        let characters = Array(text)
        var lines: [Int] = []
        var index = 0
        var line = 1
        while index < characters.count {
            let character = characters[index]
            if character == "\n" {
                line += 1
                index += 1
            } else if character == "/", index + 1 < characters.count, characters[index + 1] == "/" {
                while index < characters.count, characters[index] != "\n" { index += 1 }
            } else if character == "\"" {
                let end = endOfString(characters, from: index).end
                line += characters[index..<end].filter { $0 == "\n" }.count
                index = end
            } else if let name = errorTypes.first(where: { starts(characters, at: index, with: $0 + "(") }),
                index == 0 || !(characters[index - 1].isLetter || characters[index - 1].isNumber)
            {
                let start = line
                index += name.count + 1
                var depth = 1
                var worded = false
                while index < characters.count, depth > 0 {
                    switch characters[index] {
                    case "(": depth += 1
                    case ")": depth -= 1
                    case "\n": line += 1
                    case "\"":
                        let string = endOfString(characters, from: index)
                        if !string.onlyInterpolation { worded = true }
                        line += characters[index..<string.end].filter { $0 == "\n" }.count
                        index = string.end
                        continue
                    default: break
                    }
                    index += 1
                }
                if worded { lines.append(start) }
            } else {
                index += 1
            }
        }
        return lines
    }

    static func starts(_ characters: [Character], at index: Int, with prefix: String) -> Bool {
        index + prefix.count <= characters.count && String(characters[index..<index + prefix.count]) == prefix
    }

    /// The index after the literal opening at `start`, and whether it is one interpolation and
    /// nothing else (`"\(error)"`): a single-line literal with escapes and nested interpolations, or
    /// a multi-line one (never only an interpolation).
    static func endOfString(_ characters: [Character], from start: Int) -> (end: Int, onlyInterpolation: Bool) {
        let quotes = "\"\"\""
        if starts(characters, at: start, with: quotes) {
            var index = start + 3
            while index < characters.count, !starts(characters, at: index, with: quotes) { index += 1 }
            return (min(index + 3, characters.count), false)
        }
        var index = start + 1
        var pieces = 0
        var interpolations = 0
        while index < characters.count, characters[index] != "\"", characters[index] != "\n" {
            if characters[index] == "\\", index + 1 < characters.count, characters[index + 1] == "(" {
                index += 2
                var depth = 1
                while index < characters.count, depth > 0 {
                    switch characters[index] {
                    case "(": depth += 1
                    case ")": depth -= 1
                    case "\"":
                        index = endOfString(characters, from: index).end
                        continue
                    default: break
                    }
                    index += 1
                }
                interpolations += 1
            } else {
                pieces += 1
                index += characters[index] == "\\" ? 2 : 1
            }
        }
        return (min(index + 1, characters.count), pieces == 0 && interpolations == 1)
    }
}
