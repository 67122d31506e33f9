import Delivery
import FCMRelay
import Hummingbird
import Logging
import NIOSSL
import Prometheus
import Registry
import RegistryServer
import ServiceLifecycle
import UnixSignals
import Webhooks
import XMPPServer

/// Every peer `serve` runs, as `configuration` says: the plain HTTP listener (unless `--port off`),
/// the TLS listener speaking HTTP/2 and HTTP/1.1 by ALPN (with `--tls-cert` and `--tls-key`), the
/// XMPP connection server (with TLS, or `--xmpp-plaintext`), the feed follower, and the checkpoint
/// writer (unless checkpoints are off), and the relay's and the webhooks' workers (with `relay`,
/// the handoff its registry's sink shares).
public func buildServices(
    registry: RegistryService, configuration: ServerConfiguration, logger: Logger,
    metrics: PrometheusCollectorRegistry, relay: RelayHandoff? = nil
) throws -> [any Service] {
    // One hub: the XMPP listeners' sessions, which the HTTP applications reach as their `AppServerSessions`.
    let xmpp = XMPPHub(limits: configuration.xmpp.hub, registry: registry)
    var services: [any Service] = [
        FeedFollower(
            registry: registry, interval: configuration.feedInterval, maximumLag: configuration.readyMaximumLag,
            logger: logger),
        TokenExpiryWorker(registry: registry, logger: logger),
    ]
    // Where XMPP sessions may be, the hub looks for upstream messages other servers added.
    if configuration.xmppListening { services.append(xmpp) }
    if let relay {
        services.append(
            DeliveryWorker(
                registry: registry, channels: try DeliveryChannels.make(configuration, logger: logger),
                options: configuration.relay, handoff: relay, logger: logger,
                shutdownDeadline: configuration.shutdownDeadline))
        services.append(
            WebhookWorker(
                registry: registry,
                channel: HTTPWebhookChannel(options: configuration.webhooks, caFile: configuration.relay.caFile),
                options: configuration.webhooks, serverID: relay.serverID, keepsItsName: relay.keepsItsName, logger: logger))
    }
    if registry.checkpointPath != nil {
        services.append(
            CheckpointWriter(registry: registry, interval: configuration.storage.checkpointInterval, logger: logger))
    }
    if let http = configuration.http {
        services.append(
            buildApplication(registry: registry, settings: http, logger: logger, metrics: metrics, sessions: xmpp))
    }
    if let certificate = configuration.tls.certificate, let key = configuration.tls.key {
        let tls = try TLSConfiguration.server(certificate: certificate, key: key)
        services.append(
            try buildTLSApplication(
                registry: registry, settings: configuration.tls.settings, tls: tls, logger: logger, metrics: metrics,
                sessions: xmpp))
        if configuration.xmppListening && !configuration.xmpp.plaintext {
            services.append(
                XMPPListener(
                    registry: registry, hub: xmpp, host: configuration.host, port: configuration.xmpp.port,
                    tls: try XMPPListener.tlsContext(tls), settings: configuration.xmpp.settings,
                    maximumConnections: configuration.xmpp.maximumConnections, logger: logger))
        }
    }
    if configuration.xmppListening && configuration.xmpp.plaintext {
        services.append(
            XMPPListener(
                registry: registry, hub: xmpp, host: configuration.host, port: configuration.xmpp.port, tls: nil,
                settings: configuration.xmpp.settings, maximumConnections: configuration.xmpp.maximumConnections,
                logger: logger))
    }
    return services
}

/// Runs `services` as one group until SIGTERM or SIGINT, then stops as `configuration` says: no
/// new connections, requests in flight answered until the shutdown deadline, then whatever is
/// left cancelled and closed.
public func runServer(_ services: [any Service], configuration: ServerConfiguration, logger: Logger) async throws {
    var group = ServiceGroupConfiguration(
        services: services.map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) },
        gracefulShutdownSignals: [.sigterm, .sigint], cancellationSignals: [], logger: logger)
    group.maximumGracefulShutdownDuration = configuration.shutdownDeadline
    group.maximumCancellationDuration = .seconds(5)
    try await ServiceGroup(configuration: group).run()
}

extension TLSConfiguration {
    /// A server configuration from a PEM certificate chain and private key, as `tls init` writes
    /// them: what the HTTPS and XMPP listeners both start from.
    public static func server(certificate: String, key: String) throws -> TLSConfiguration {
        makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
    }
}
