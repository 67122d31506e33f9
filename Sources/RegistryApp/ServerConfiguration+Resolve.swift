import Delivery
import FCMWire
import NIOSSL
import Registry

/// A configuration from flags, then the environment, then the defaults, with the checks across options that no
/// single option's reading can make.
extension ServerConfiguration {
    /// The option with this flag (without dashes), for commands that take one of `serve`'s options.
    public static func option(named flag: String) -> ConfigurationOption {
        options.first { $0.flag == flag }!
    }

    /// The configuration from `flags` (by flag name, without dashes), then the environment, then
    /// the defaults.
    /// - Throws: `ConfigurationError` naming the first option whose value is not acceptable.
    public static func resolve(flags: [String: String], environment: [String: String]) throws(ConfigurationError)
        -> ServerConfiguration
    {
        let configuration = try applying(flags: flags, environment: environment)
        guard (configuration.tls.certificate == nil) == (configuration.tls.key == nil) else {
            throw ConfigurationError(description: ConfigurationWording.tlsCertificateAndKeyTogether)
        }
        guard !configuration.xmpp.plaintext || !configuration.xmpp.off else {
            throw ConfigurationError(description: ConfigurationWording.xmppPlaintextWithoutPort)
        }
        guard configuration.http != nil || configuration.tls.isConfigured else {
            throw ConfigurationError(description: ConfigurationWording.noListener)
        }
        if let caFile = configuration.relay.caFile {
            guard let certificates = try? NIOSSLCertificate.fromPEMFile(caFile), !certificates.isEmpty else {
                throw ConfigurationError(description: ConfigurationWording.cannotReadCAFile(caFile))
            }
        }
        return configuration
    }

    /// The registry limits `serve` enforces with this environment, for the commands that write to
    /// the database (`import`, `import-groups`, `token rekey`): they hold to the same limits.
    /// - Throws: `ConfigurationError` naming a variable whose value is not acceptable.
    public static func limits(environment: [String: String]) throws(ConfigurationError) -> Limits {
        try applying(flags: [:], environment: environment).limits
    }

    /// Every option's value from `flags`, then the environment, over the defaults; no check
    /// across options.
    private static func applying(flags: [String: String], environment: [String: String]) throws(ConfigurationError)
        -> ServerConfiguration
    {
        var configuration = ServerConfiguration()
        for option in options {
            let (value, source): (String?, String) =
                flags[option.flag].map { ($0, "--\(option.flag)") } ?? (environment[option.variable], option.variable)
            guard let value else { continue }
            if let expected = option.apply(value, &configuration) {
                throw ConfigurationError(
                    description: ConfigurationWording.invalidValue(
                        value, source: source, flag: option.flag, variable: option.variable, expected: expected))
            }
        }
        return configuration
    }

}
