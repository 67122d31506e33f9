/// What this executable is: `fcm-registry --version` prints it. `scripts/package.sh` writes the
/// commit it builds from here for the release archive, and puts the file back afterwards.
enum BuildInfo {
    static let version = "0.17.0"
    static let commit = "commit 849ae81aa6b6, modified"

    static var description: String { "\(version) (\(commit))" }
}
