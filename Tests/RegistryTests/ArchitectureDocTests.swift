import Foundation
import Testing

/// Keeps the floor plan in `docs/architecture.md` true where it is easiest to let drift: the
/// packages and products each target depends on (the "imports" column of "## Targets"; its project
/// targets are `TargetImportsTests`'), and the size of the storage seams (the table of
/// requirements under "## Seams"). Both files are read as text, so a change to `Package.swift` or
/// to a store protocol fails here until the document says it too.
@Suite("Architecture document")
struct ArchitectureDocTests {
    static let document = repositoryRoot.appendingPathComponent("docs/architecture.md")
    /// What an "imports" cell may say besides targets and packages.
    static let notes: Set<String> = ["standard library only", "Foundation", "nothing of the registry"]

    /// A target of `Package.swift` (not a test target): the project targets and, per package, the
    /// products it names in `dependencies: [...]`.
    struct Declared {
        var targets: Set<String> = []
        var products: [String: Set<String>] = [:]
        var underTests = false
    }

    static func manifest() throws -> [String: Declared] {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("Package.swift"), encoding: .utf8)
        let heads = text.matches(of: /\.(target|executableTarget|testTarget)\(\s*name:\s*"([^"]+)"/)
        var declared: [String: Declared] = [:]
        for (index, head) in heads.enumerated() where head.output.1 != "testTarget" {
            let end = index + 1 < heads.count ? heads[index + 1].range.lowerBound : text.endIndex
            let block = text[head.range.upperBound..<end]
            var target = Declared(underTests: block.contains("path: \"Tests/"))
            if let start = block.range(of: "dependencies: [") {
                let list = String(block[start.upperBound...].prefix { $0 != "]" })
                for product in list.matches(of: /\.product\(\s*name:\s*"([^"]+)",\s*package:\s*"([^"]+)"\s*\)/) {
                    target.products[String(product.output.2), default: []].insert(String(product.output.1))
                }
                let names = list.replacing(/\.product\([^)]*\)/, with: "")
                target.targets = Set(names.matches(of: /"([^"]+)"/).map { String($0.output.1) })
            }
            declared[String(head.output.2)] = target
        }
        return declared
    }

    /// The cells of the table whose header row starts with `| header |`, by its first cell's backticked name.
    static func table(after header: String) throws -> [(name: String, cells: [String])] {
        let text = try String(contentsOf: document, encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        let start = try #require(
            lines.firstIndex { $0.hasPrefix("| \(header) |") }, "docs/architecture.md has no table headed \(header)")
        return lines[(start + 2)...].prefix { $0.hasPrefix("|") }.map { line in
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces) }
            return (cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`")), cells)
        }
    }

    /// An "imports" cell's entries, split at the commas outside parentheses.
    static func entries(_ cell: String) -> [String] {
        var entries: [String] = []
        var current = ""
        var depth = 0
        for character in cell {
            if character == "(" { depth += 1 }
            if character == ")" { depth -= 1 }
            if character == ",", depth == 0 {
                entries.append(current.trimmingCharacters(in: .whitespaces))
                current = ""
            } else {
                current.append(character)
            }
        }
        entries.append(current.trimmingCharacters(in: .whitespaces))
        return entries.filter { !$0.isEmpty }
    }

    @Test("Each target's row names exactly the packages and products Package.swift gives it")
    func packagesMatchTheManifest() throws {
        let declared = try Self.manifest()
        let rows = try Self.table(after: "target")
        for (name, cells) in rows {
            let target = try #require(declared[name], "\(name) has a row in docs/architecture.md and no target in Package.swift")
            var documented: [String: Set<String>] = [:]
            var targets: Set<String> = []
            for entry in Self.entries(cells.last ?? "") where !Self.notes.contains(entry) {
                if entry.hasPrefix("`") {
                    targets.insert(entry.trimmingCharacters(in: CharacterSet(charactersIn: "`")))
                } else if let open = entry.firstIndex(of: "("), entry.hasSuffix(")") {
                    let package = entry[..<open].trimmingCharacters(in: .whitespaces)
                    let products = entry[entry.index(after: open)..<entry.index(before: entry.endIndex)]
                    documented[package] = Set(products.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
                } else {
                    Issue.record("\(name)'s row names \"\(entry)\": write a package as package (Product, …)")
                }
            }
            #expect(
                targets == target.targets,
                """
                \(name) depends on \(target.targets.sorted()) in Package.swift, its row in docs/architecture.md \
                names \(targets.sorted()): update the row
                """)
            #expect(
                documented == target.products,
                """
                \(name) uses \(Self.describe(target.products)) in Package.swift, its row in docs/architecture.md \
                says \(Self.describe(documented)): update the row's "imports" cell
                """)
        }
        let missing = declared.filter { !$0.value.underTests }.keys.filter { key in !rows.contains { $0.name == key } }
        #expect(missing.isEmpty, "targets of Package.swift without a row in docs/architecture.md: \(missing.sorted())")
    }

    static func describe(_ products: [String: Set<String>]) -> String {
        products.keys.sorted().map { "\($0) (\(products[$0]!.sorted().joined(separator: ", ")))" }
            .joined(separator: ", ")
    }

    /// The requirements of `protocol name` in `file`: each line of its declaration that declares a
    /// `func` or a `var` (attributes and `static`/`mutating` before it).
    static func requirements(of name: String, in file: URL) throws -> Int? {
        let text = try String(contentsOf: file, encoding: .utf8)
        guard let head = text.firstMatch(of: try Regex("(?m)^(?:public |package )?protocol \(name)\\b[^{]*\\{")) else {
            return nil
        }
        var depth = 1
        var index = head.range.upperBound
        var body = ""
        while depth > 0, index < text.endIndex {
            let character = text[index]
            if character == "{" { depth += 1 }
            if character == "}" { depth -= 1 }
            if depth > 0 { body.append(character) }
            index = text.index(after: index)
        }
        let modifiers: Set<Substring> = ["static", "mutating", "nonisolated", "public", "package"]
        return body.split(separator: "\n").filter { line in
            let words = line.split(separator: " ").filter { !$0.hasPrefix("@") && !modifiers.contains($0) }
            return words.first == "func" || words.first == "var"
        }.count
    }

    @Test("The storage seams have as many requirements as docs/architecture.md says")
    func seamSizesMatchTheCode() throws {
        let rows = try Self.table(after: "protocol")
        #expect(!rows.isEmpty)
        let sources = repositoryRoot.appendingPathComponent("Sources")
        for (name, cells) in rows {
            let path = cells[1].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            let stated = try #require(Int(cells[2]), "\(name)'s row gives no number of requirements")
            let counted = try Self.requirements(of: name, in: sources.appendingPathComponent(path))
            #expect(counted != nil, "\(name) is not declared in Sources/\(path): update its row in docs/architecture.md")
            if let counted {
                #expect(
                    counted == stated,
                    "\(name) has \(counted) requirements, docs/architecture.md says \(stated): update the number")
            }
        }
        // Every store and driver protocol of the domain has a row.
        let folder = sources.appendingPathComponent("Registry")
        let files = try #require(FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil))
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }
        let documented = Set(rows.map(\.name))
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            for match in text.matches(of: /(?m)^(?:public |package )?protocol (\w+(?:Store|Driver))\b/) {
                let name = String(match.output.1)
                #expect(
                    documented.contains(name),
                    "\(name) (\(file.lastPathComponent)) has no row in docs/architecture.md's table of seams: add one")
            }
        }
    }
}
