import Foundation
import Testing

/// Keeps the "Targets" table of `docs/architecture.md` true: the project's own targets each source
/// folder imports are exactly those its row names, each of them in a row above (dependencies point
/// one way, down the table), and each declared in `Package.swift`, with nothing declared that no
/// file imports. A target that only builds because a module leaked in through another one, or an
/// edge that runs up the table, fails here rather than in review.
@Suite("Target imports")
struct TargetImportsTests {
    /// One row of the table: the target and the project targets its "imports" cell names, in
    /// table order.
    struct Row {
        var target: String
        var imports: Set<String>
        /// "standard library only": no `import` at all.
        var standardLibraryOnly: Bool
    }

    static let sources = repositoryRoot.appendingPathComponent("Sources")
    /// The folder that holds one target of each channel (`Sources/Channels/FCMRelay`, …).
    static let channels = "Channels"

    /// Each target's folder by its name: `Sources/<name>`, or `Sources/Channels/<name>` for a channel.
    static func targetFolders() throws -> [String: URL] {
        func subfolders(of folder: URL) throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { !$0.hasPrefix(".") }
        }
        var folders: [String: URL] = [:]
        for name in try subfolders(of: sources) where name != channels {
            folders[name] = sources.appendingPathComponent(name)
        }
        let channelFolder = sources.appendingPathComponent(channels)
        for name in try subfolders(of: channelFolder) {
            folders[name] = channelFolder.appendingPathComponent(name)
        }
        return folders
    }
    static let accessLevels: Set<Substring> = ["public", "package", "internal", "fileprivate", "private"]
    static let declarationKinds: Set<Substring> = [
        "struct", "class", "enum", "protocol", "func", "var", "let", "typealias",
    ]

    /// The rows of the table under "## Targets", in order.
    static func rows() throws -> [Row] {
        let text = try String(
            contentsOf: repositoryRoot.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
        let section = try #require(text.components(separatedBy: "## Targets").dropFirst().first)
            .components(separatedBy: "\n## ")[0]
        let cells = section.split(separator: "\n").filter { $0.hasPrefix("| `") }.map { line in
            line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces) }
        }
        let names = try cells.map { cells in
            #expect(cells.count == 3, "a row of the table has three cells: \(cells.first ?? "")")
            return try #require(backticked(cells[0]).first)
        }
        return cells.map { cells in
            let imports = cells.last ?? ""
            return Row(
                target: backticked(cells[0])[0], imports: Set(backticked(imports)).intersection(names),
                standardLibraryOnly: imports == "standard library only")
        }
    }

    /// The names written in backticks in a cell.
    static func backticked(_ cell: String) -> [String] {
        cell.split(separator: "`", omittingEmptySubsequences: false).enumerated()
            .filter { $0.offset % 2 == 1 }.map { String($0.element) }
    }

    /// Every module the target's files import (`@testable`, `import struct`, and imports under
    /// `#if` included), by its top-level name.
    static func imports(of target: String) throws -> Set<String> {
        let folder = try #require(try targetFolders()[target], "no folder for target \(target)")
        let files = try #require(FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil))
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }
        var modules: Set<String> = []
        for file in files {
            for line in try String(contentsOf: file, encoding: .utf8).split(separator: "\n") {
                // `@testable`, `@preconcurrency` and access levels before it; a kind (`struct`) after it.
                let words = line.split(separator: " ").filter { !$0.hasPrefix("@") && !Self.accessLevels.contains($0) }
                guard words.first == "import", words.count >= 2 else { continue }
                let name = words.count >= 3 && Self.declarationKinds.contains(words[1]) ? words[2] : words[1]
                modules.insert(String(name.split(separator: ".")[0]))
            }
        }
        return modules
    }

    /// The project targets each target of `Package.swift` depends on by name (not `.product`s).
    static func declaredDependencies() throws -> [String: Set<String>] {
        let manifest = try String(contentsOf: repositoryRoot.appendingPathComponent("Package.swift"), encoding: .utf8)
        let heads = manifest.matches(of: /\.(?:target|executableTarget|testTarget)\(\s*name:\s*"([^"]+)"/)
        var declared: [String: Set<String>] = [:]
        for (index, head) in heads.enumerated() {
            let end = index + 1 < heads.count ? heads[index + 1].range.lowerBound : manifest.endIndex
            let block = manifest[head.range.upperBound..<end]
            var names: Set<String> = []
            if let start = block.range(of: "dependencies: [") {
                // Up to the closing bracket: `.product(…)` entries hold none, and are dropped.
                let list = block[start.upperBound...].prefix { $0 != "]" }.replacing(/\.product\([^)]*\)/, with: "")
                names = Set(list.matches(of: /"([^"]+)"/).map { String($0.output.1) })
            }
            declared[String(head.output.1)] = names
        }
        return declared
    }

    @Test("Every source folder has a row, and every row a folder")
    func everyTargetHasARow() throws {
        #expect(Set(try Self.rows().map(\.target)) == Set(try Self.targetFolders().keys))
    }

    @Test("Each target imports exactly the project targets its row names, all of them above it")
    func importsMatchTheTable() throws {
        let rows = try Self.rows()
        let targets = Set(rows.map(\.target))
        for (index, row) in rows.enumerated() {
            let modules = try Self.imports(of: row.target)
            let imported = modules.intersection(targets)
            #expect(
                imported == row.imports,
                """
                \(row.target) imports \(imported.sorted()), its row in docs/architecture.md says \
                \(row.imports.sorted()): fix the code or the row
                """)
            let above = Set(rows[..<index].map(\.target))
            #expect(
                imported.isSubset(of: above),
                "\(row.target) imports \(imported.subtracting(above).sorted()) from below it")
            if row.standardLibraryOnly {
                #expect(modules.isEmpty, "\(row.target) is standard library only, and imports \(modules.sorted())")
            }
        }
    }

    @Test("Package.swift declares each target's project imports, and nothing else of the project")
    func manifestMatchesImports() throws {
        let rows = try Self.rows()
        let targets = Set(rows.map(\.target))
        let declared = try Self.declaredDependencies()
        for row in rows {
            let imported = try Self.imports(of: row.target).intersection(targets)
            let dependencies = try #require(declared[row.target], "\(row.target) is not a target in Package.swift")
            #expect(
                dependencies == imported,
                "\(row.target) declares \(dependencies.sorted()) in Package.swift and imports \(imported.sorted())")
        }
    }
}
