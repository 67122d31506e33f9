import Foundation

/// What this executable is: `fcm-registry --version` prints it. `scripts/package.sh` writes the
/// commit it builds from here for the release archive, and puts the file back afterwards.
enum BuildInfo {
    static let version = "0.17.0"
    static let commit = "development build"

    static var description: String { "\(version) (\(commit))" }

    /// What `--version` prints. A build from source has no stamped commit (a package plugin or a
    /// generated file could stamp one; neither is worth it for a development build), so when the
    /// executable sits in a checkout's `.build` (or `.build-*`) folder, git is asked for the
    /// commit that checkout is at — at run time, so it is the checkout's commit now, which is the
    /// build's unless the checkout moved since: the words say so. Anywhere else, or without git,
    /// it prints ``description``.
    static func versionLine() -> String {
        guard commit == "development build", let executable = Bundle.main.executableURL?.resolvingSymlinksInPath(),
            let checkout = checkout(holding: executable.path),
            let head = git(["rev-parse", "--short=12", "HEAD"], in: checkout)
        else { return description }
        let modified =
            git(["status", "--porcelain", "--untracked-files=no"], in: checkout).map { !$0.isEmpty } ?? false
        return "\(version) (development build; its checkout is at commit \(head)\(modified ? ", modified" : ""))"
    }

    /// The folder holding the `.build` folder `path` is in, when that folder is a git checkout.
    static func checkout(holding path: String) -> String? {
        let components = path.split(separator: "/", omittingEmptySubsequences: false)
        guard let build = components.lastIndex(where: { $0 == ".build" || $0.hasPrefix(".build-") }), build > 0 else {
            return nil
        }
        let root = components[..<build].joined(separator: "/")
        let folder = root.isEmpty ? "/" : root
        return FileManager.default.fileExists(atPath: folder + "/.git") ? folder : nil
    }

    /// What `git arguments` prints in `folder`, trimmed; `nil` when git is missing or fails.
    private static func git(_ arguments: [String], in folder: String) -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["git", "-C", folder] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return nil }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { return nil }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
