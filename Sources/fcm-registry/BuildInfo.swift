/// What this executable is: `fcm-registry --version` prints it. `scripts/package.sh` writes the
/// commit it builds from here for the release archive, and puts the file back afterwards.
enum BuildInfo {
    static let version = "0.17.0"
    static let commit = "development build"

    static var description: String { "\(version) (\(commit))" }
}
