/// The command line's own words: a value a command cannot use, a file it cannot read or write, and
/// what it says when it stops early. A refusal of the registry's is `RefusalWording`'s, as the
/// native API says it; `serve`'s options are `ConfigurationWording`'s. Written once here so that
/// the call sites name them and tests and docs quote one place.
public enum CommandWording {
    /// The one line a failed command leaves on standard error.
    public static func errorLine(_ message: String) -> String {
        "Error: \(message)\n"
    }

    /// The line `serve` leaves on standard error when it cannot start (status 2); `reason` is in
    /// `ConfigurationWording`'s words.
    public static func serveStopped(_ reason: String) -> String {
        "fcm-registry serve: \(reason)\n"
    }

    // MARK: - Options that do not fit together

    /// `--force` without `--output` (`export`, `project create`).
    public static let forceNeedsOutput = "--force replaces the --output file: give --output too"
    public static let scopeNames = "--scope is send, subscribe, read or admin"
    public static let audienceTargetOne =
        "give exactly one of --condition, --topic, --group, --notification-key, --token"
    public static let audienceWhereNotJSON =
        "--where must be a JSON object such as '{\"platform\":[\"ios\"],\"locale\":[\"fr\"]}'"
    public static let generateCounts = "need tokens > 0, topics > 0 and at least one subscription per topic"
    public static let pageSizeNotPositive = "--page-size must be a positive integer"
    public static let pageTokenNotIssued =
        "--page-token is not one this listing issued: pass the previous nextPageToken"

    /// `copy` without a `--from`; `variable` is the environment variable that may name it instead.
    public static func copyFromMissing(variable: String) -> String {
        "--from (or $\(variable)) names the database to read"
    }

    /// `copy` without a `--to`; `variable` is the environment variable that may name it instead.
    public static func copyToMissing(variable: String) -> String {
        "--to (or $\(variable)) names the database to write"
    }

    public static let copySameDatabase = "--from and --to name the same database"

    /// `project tokens` given a duration it cannot read.
    public static let staleAfterDuration = "--stale-after is a whole number and a unit (s, m, h or d), such as 30d"
    public static let expireAfterDuration =
        "--expire-after is a whole number and a unit (s, m, h or d), such as 270d, or off"

    public static let sendToStaleBoolean = "--send-to-stale is true or false"

    // MARK: - project relay and project mirror

    public static let rateOrDefaultRate = "give --rate N or --default-rate, not both"
    /// `project relay` with neither a change nor `--off`, or with both.
    public static let relayWhatToDo =
        "give --service-account FILE (and --rate N) to turn delivery on, --rate N or --default-rate to change its rate, or --off to turn it off"

    public static func rateOutOfRange(upperBound: Int) -> String {
        "--rate must be between 1 and \(upperBound) sends a second"
    }

    /// `project relay --rate N` for a project with no relay settings to change.
    public static func doesNotRelay(_ projectID: String) -> String {
        "\(projectID) does not relay: give --service-account FILE as well"
    }

    /// `project mirror` with none or more than one of its three choices.
    public static let mirrorWhatToDo =
        "give --service-account FILE to turn the mirror on, --off to turn it off, or --report"

    // MARK: - Projects, groups, topics, tokens

    /// `--project-id` (or `$FCM_REGISTRY_PROJECT`) names no project; `projects` lists those there are.
    public static func noProject(_ wanted: String, projects: [String]) -> String {
        "no project \(wanted); projects: \(projects.joined(separator: ", "))"
    }

    public static let noProjectYet = "the database has no project yet: run `fcm-registry project create`"

    /// No `--project-id` in a database of several projects.
    public static func severalProjects(_ projects: [String]) -> String {
        "several projects: pick one with --project-id (\(projects.joined(separator: ", ")))"
    }

    /// `import-groups` into a project the database does not hold.
    public static func noProjectToImportInto(_ project: String) -> String {
        "no project \(project): create it first with `fcm-registry project create`"
    }

    public static func noGroupNamed(_ name: String) -> String {
        "no group named \(name)"
    }

    public static func noTopicNamed(_ name: String) -> String {
        "no topic named \(name)"
    }

    public static let tokenUnknown = "the project does not know this token"

    // MARK: - token rekey's pairs

    public static let rekeyWhatToDo = "give FROM and TO, or --file with one from,to pair per line"
    public static let pairsFileTooLarge = "the file is larger than 1,000 pairs can be"

    /// `line` counts from 1.
    public static func pairsLineNotAPair(line: Int) -> String {
        "line \(line): expected from,to"
    }

    public static func pairsTooMany(limit: Int) -> String {
        "at most \(limit) pairs per file"
    }

    public static let pairsNone = "the file holds no from,to pair"

    // MARK: - Files

    /// `generate` onto an SQLite file that is there already.
    public static func databaseExists(_ location: String) -> String {
        "\(location) exists; generate writes a new database"
    }

    /// `generate` onto a PostgreSQL URL whose store is not PostgreSQL's.
    public static func notPostgreSQL(_ location: String) -> String {
        "\(location) is not PostgreSQL"
    }

    /// An `import-groups` input without a single member row; `file` is `nil` or `-` for standard input.
    public static func noGroupRows(in file: String?, columns: [String]) -> String {
        let name = file.map { $0 == "-" ? "the input" : $0 } ?? "the input"
        return "\(name) holds no row; expected one per member: " + columns.joined(separator: ",")
    }

    /// A service-account file that cannot be read.
    public static func cannotRead(_ path: String) -> String {
        "cannot read \(path)"
    }

    /// A file a command writes whole (a service account) that cannot be created.
    public static func cannotWrite(_ path: String) -> String {
        "cannot write \(path)"
    }

    public static func cannotWriteServerKey(to path: String) -> String {
        "cannot write the server key to \(path)"
    }

    /// The input file an import reads; `reason` is the system's (`strerror`).
    public static func cannotOpen(_ path: String, reason: String) -> String {
        "cannot open \(path): \(reason)"
    }

    public static func cannotReadInput(_ reason: String) -> String {
        "cannot read the input: \(reason)"
    }

    public static func cannotWriteOutput(_ reason: String) -> String {
        "cannot write the output: \(reason)"
    }

    // MARK: - Files written private (mode 0600)

    public static func isAFolder(_ path: String) -> String {
        "\(path) is a folder; name the file to write"
    }

    public static func fileExists(_ path: String) -> String {
        "\(path) exists; --force replaces it"
    }

    /// `reason` is the system's (`strerror`), here and in the two below.
    public static func cannotCreate(_ path: String, reason: String) -> String {
        "cannot create \(path): \(reason)"
    }

    public static func cannotWrite(_ path: String, reason: String) -> String {
        "cannot write \(path): \(reason)"
    }

    /// The finished file could not take the old one's place (`--force`).
    public static func cannotReplace(_ path: String, reason: String) -> String {
        "cannot replace \(path): \(reason)"
    }

    // MARK: - Stopped early (imports and copy)

    /// An import's line when a line is refused; `failure` says which and why.
    public static func importStopped(_ label: String, failure: String) -> String {
        "\(label) stopped:\n\(failure)\n"
    }

    /// After a refused line under `--check`.
    public static let checkWroteNothing = "nothing was written (--check). Fix the file and check it again."
    /// After a refused line: its batch was rolled back, the batches before it stay.
    public static let importBatchNotWritten =
        "nothing of the batch holding those lines was written; the batches before it were. Fix the file and run the import again: it is idempotent."

    /// An import under `--check` stopped by Ctrl-C; `line` is grouped (`12,345`).
    public static func checkInterrupted(_ label: String, afterLine line: String) -> String {
        "\(label) --check interrupted after line \(line): nothing was written; the lines after it are not checked"
    }

    /// An import stopped by Ctrl-C; `line` is grouped (`12,345`).
    public static func importInterrupted(_ label: String, afterLine line: String) -> String {
        "\(label) interrupted after line \(line): every line up to it is written. Running the same command "
            + "again finishes the rest: what is here already is matched by its natural key, not added twice."
    }

    /// `copy` stopped by Ctrl-C; `records` is grouped (`12,345`).
    public static func copyInterrupted(afterRecords records: String) -> String {
        "copy interrupted after \(records) records: those are written. Running the same command "
            + "again finishes the copy: what --to holds already is matched by its natural key, not added twice.\n"
    }

    /// The first Ctrl-C during long work.
    public static func stoppingAfterBatch(_ label: String) -> String {
        "\n\(label): stopping once the batch being written is committed (Ctrl-C again stops at once)\n"
    }

    /// The second Ctrl-C.
    public static func stoppedAtOnce(_ label: String) -> String {
        "\n\(label): stopped at once; running the same command again finishes it\n"
    }

    // MARK: - copy's webhooks

    /// A webhook `copy` leaves out, with why (`webhooksFull`, `webhookIDTaken`).
    public static func webhookNotCopied(_ webhook: String, of project: String, why: String) -> String {
        "webhook \(webhook) of \(project) not copied: \(why)\n"
    }

    public static func webhooksFull(limit: Int) -> String {
        "the project has \(limit) webhooks in --to already"
    }

    public static let webhookIDTaken = "another project of --to has a webhook with that id"
}
