import Foundation

/// The rules for device-group names (`notification_key_name`). FCM documents none; these keep
/// names sane to store, list and compare.
///
/// A name is kept in Unicode NFC, so the composed and decomposed spellings of "café" are one
/// group; it is limited in UTF-8 bytes, not in characters (one character can carry any number of
/// combining marks); and it may not hold control characters or invisible format characters
/// (U+200B, U+202E, …), which would make two names look alike or a listing read wrongly.
public enum GroupName {
    /// The name in its stored form.
    /// - Throws: `.invalidGroupName` saying what is wrong.
    public static func normalized(_ name: String, maximumBytes: Int) throws(RegistryError) -> String {
        guard !name.isEmpty else { throw .invalidGroupName("notification_key_name must not be empty") }
        // NFC never needs more than three times the bytes of its result: refuse longer input
        // before normalizing it, so the work stays bounded.
        guard name.utf8.count <= maximumBytes * 3 else { throw tooLong(maximumBytes) }
        let composed = name.precomposedStringWithCanonicalMapping
        guard composed.utf8.count <= maximumBytes else { throw tooLong(maximumBytes) }
        for scalar in composed.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .privateUse:
                throw .invalidGroupName(
                    "notification_key_name must not contain control or invisible characters (found U+\(String(scalar.value, radix: 16, uppercase: true)))"
                )
            default:
                if scalar.properties.isNoncharacterCodePoint {
                    throw .invalidGroupName("notification_key_name must not contain noncharacters")
                }
            }
        }
        return composed
    }

    private static func tooLong(_ maximumBytes: Int) -> RegistryError {
        .invalidGroupName("notification_key_name is longer than \(maximumBytes) bytes of UTF-8")
    }
}
