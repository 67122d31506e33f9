import Delivery
import Logging
import Registry
import RegistryApp
import RegistryServer
import Testing

@Suite("Configuration")
struct ConfigurationTests {
    @Test("Flags win over the environment, which wins over the defaults")
    func layering() throws {
        let configuration = try ServerConfiguration.resolve(
            flags: ["port": "9000", "idle-timeout": "250ms"],
            environment: ["FCM_REGISTRY_PORT": "9001", "FCM_REGISTRY_DB": "/tmp/x.sqlite", "LOG_LEVEL": "debug"])
        #expect(configuration.http?.port == 9000)
        #expect(configuration.storage.database == "/tmp/x.sqlite")
        #expect(configuration.logLevel == .debug)
        #expect(configuration.http?.idleTimeout == .milliseconds(250))
        #expect(configuration.tls.settings.idleTimeout == .milliseconds(250))
        #expect(configuration.shutdownDeadline == .seconds(10))
        #expect(configuration.host == "127.0.0.1")
    }

    @Test("--ready-max-lag bounds the follower's warning and every listener's /readyz alike")
    func readyMaximumLag() throws {
        let flag = try ServerConfiguration.resolve(flags: ["ready-max-lag": "3s"], environment: [:])
        #expect(flag.readyMaximumLag == .seconds(3))
        #expect(flag.http?.readyMaximumLag == .seconds(3))
        #expect(flag.tls.settings.readyMaximumLag == .seconds(3))
        let variable = try ServerConfiguration.resolve(flags: [:], environment: ["FCM_REGISTRY_READY_MAX_LAG": "500ms"])
        #expect(variable.http?.readyMaximumLag == .milliseconds(500))
        #expect(try ServerConfiguration.resolve(flags: [:], environment: [:]).http?.readyMaximumLag == .seconds(10))
    }

    @Test(
        "A bad value names its option, whether it came from a flag or the environment",
        arguments: [
            ([:], ["FCM_REGISTRY_PORT": "abc"], "FCM_REGISTRY_PORT"),
            (["port": "99999"], [:], "--port"),
            (["group-members": "0"], [:], "--group-members"),
            ([:], ["LOG_LEVEL": "loud"], "LOG_LEVEL"),
            (["shutdown-deadline": "10"], [:], "--shutdown-deadline"),
            (["idle-timeout": "-1s"], [:], "--idle-timeout"),
            (["feed-interval": "99999h"], [:], "--feed-interval"),
            (["xmpp-port": "5235x"], [:], "--xmpp-port"),
            ([:], ["FCM_REGISTRY_XMPP_PLAINTEXT": "maybe"], "FCM_REGISTRY_XMPP_PLAINTEXT"),
            (["xmpp-plaintext": "true", "xmpp-port": "off"], [:], "--xmpp-plaintext"),
            ([:], ["FCM_REGISTRY_WEBHOOK_ALLOW_PRIVATE_NETWORKS": "perhaps"], "FCM_REGISTRY_WEBHOOK_ALLOW_PRIVATE_NETWORKS"),
            (["webhook-retry-schedule": "5s,,5m"], [:], "--webhook-retry-schedule"),
            (["webhook-retry-schedule": "5s,48h"], [:], "--webhook-retry-schedule"),
        ] as [([String: String], [String: String], String)])
    func badValues(flags: [String: String], environment: [String: String], named: String) {
        #expect {
            _ = try ServerConfiguration.resolve(flags: flags, environment: environment)
        } throws: { error in
            "\(error)".contains(named)
        }
    }

    @Test("--audit-retention keeps entries 90 days unless told, from 1 to 3650 days, from the flag or the environment")
    func auditRetention() throws {
        let defaults = try ServerConfiguration.resolve(flags: [:], environment: [:])
        #expect(defaults.limits.auditRetention == .seconds(90 * 86_400))
        let flag = try ServerConfiguration.resolve(flags: ["audit-retention": "30d"], environment: [:])
        #expect(flag.limits.auditRetention == .seconds(30 * 86_400))
        let variable = try ServerConfiguration.resolve(flags: [:], environment: ["FCM_REGISTRY_AUDIT_RETENTION": "48h"])
        #expect(variable.limits.auditRetention == .seconds(2 * 86_400))
        for bad in ["3651d", "23h", "0d", "1x", "", "-1d"] {
            #expect(throws: ConfigurationError.self, "\(bad)") {
                _ = try ServerConfiguration.resolve(flags: [:], environment: ["FCM_REGISTRY_AUDIT_RETENTION": bad])
            }
        }
    }

    @Test("--idempotency-retention keeps keys 24 h unless told, from 1 s to 30 days, from the flag or the environment")
    func idempotencyRetention() throws {
        #expect(try ServerConfiguration.resolve(flags: [:], environment: [:]).limits.idempotencyRetention == .seconds(86_400))
        let flag = try ServerConfiguration.resolve(flags: ["idempotency-retention": "7d"], environment: [:])
        #expect(flag.limits.idempotencyRetention == .seconds(7 * 86_400))
        let variable = try ServerConfiguration.resolve(
            flags: [:], environment: ["FCM_REGISTRY_IDEMPOTENCY_RETENTION": "90m"])
        #expect(variable.limits.idempotencyRetention == .seconds(5400))
        for bad in ["31d", "0s", "500ms", "1x", "", "-1h"] {
            #expect(throws: ConfigurationError.self, "\(bad)") {
                _ = try ServerConfiguration.resolve(flags: [:], environment: ["FCM_REGISTRY_IDEMPOTENCY_RETENTION": bad])
            }
        }
        // Other durations keep their 24 h ceiling.
        #expect(throws: ConfigurationError.self) {
            _ = try ServerConfiguration.resolve(flags: ["relay-deadline": "2d"], environment: [:])
        }
    }

    @Test("The XMPP listener runs with TLS or --xmpp-plaintext, on its port, unless --xmpp-port off")
    func xmppListener() throws {
        let plain = try ServerConfiguration.resolve(flags: [:], environment: [:])
        #expect(!plain.xmppListening)
        let tls = try ServerConfiguration.resolve(flags: ["tls-cert": "c.pem", "tls-key": "k.pem"], environment: [:])
        #expect(tls.xmppListening && tls.xmpp.port == 5235)
        let off = try ServerConfiguration.resolve(
            flags: ["tls-cert": "c.pem", "tls-key": "k.pem", "xmpp-port": "off"], environment: [:])
        #expect(!off.xmppListening)
        let debugging = try ServerConfiguration.resolve(
            flags: ["xmpp-port": "15235"], environment: ["FCM_REGISTRY_XMPP_PLAINTEXT": "1"])
        #expect(debugging.xmppListening && debugging.xmpp.plaintext && debugging.xmpp.port == 15235)
        let noHTTP = try ServerConfiguration.resolve(flags: ["port": "off", "tls-cert": "c", "tls-key": "k"], environment: [:])
        #expect(noHTTP.http == nil)
    }

    @Test("Webhooks: public https URLs and Svix's schedule by default; the flag or its variable allows private networks")
    func webhookOptions() throws {
        let defaults = try ServerConfiguration.resolve(flags: [:], environment: [:])
        #expect(defaults.webhooks.urlPolicy == WebhookURLPolicy(allowPrivateNetworks: false))
        #expect(defaults.webhooks.retrySchedule == .standard)
        let flagged = try ServerConfiguration.resolve(flags: ["webhook-allow-private-networks": "true"], environment: [:])
        #expect(flagged.webhooks.allowPrivateNetworks)
        let variable = try ServerConfiguration.resolve(
            flags: [:], environment: ["FCM_REGISTRY_WEBHOOK_ALLOW_PRIVATE_NETWORKS": "1"])
        #expect(variable.webhooks.allowPrivateNetworks)
        let schedule = try ServerConfiguration.resolve(
            flags: ["webhook-retry-schedule": "1s, 2s,250ms"], environment: [:])
        #expect(schedule.webhooks.retrySchedule.waits == [.seconds(1), .seconds(2), .milliseconds(250)])
    }

    @Test("Every option has a flag, a variable and help, and no two share a name")
    func optionTable() {
        let options = ServerConfiguration.options
        #expect(Set(options.map(\.flag)).count == options.count)
        #expect(Set(options.map(\.variable)).count == options.count)
        #expect(options.allSatisfy { !$0.help.isEmpty && !$0.variable.isEmpty })
    }
}
