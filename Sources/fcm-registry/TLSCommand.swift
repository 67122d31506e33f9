import ArgumentParser

/// `fcm-registry tls init`: a local CA and a server certificate for Google's host names.
struct TLSCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tls", abstract: "Certificates for serving under Google's host names.",
        subcommands: [Init.self])

    struct Init: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a local CA and a server certificate for fcm.googleapis.com and the other hosts SDKs call.")

        @Option(help: "The directory to write ca.pem, ca-key.pem, server.pem and server-key.pem to.")
        var dir: String

        @Option(help: "A name for the server certificate (repeat it; default: Google's FCM hosts, localhost, 127.0.0.1).")
        var name: [String] = []

        func run() async throws {
            let files = try LocalCertificates.create(
                in: dir, names: name.isEmpty ? LocalCertificates.defaultNames : name)
            print(
                """
                wrote \(files.caCertificate), \(files.caKey) (keep it private),
                      \(files.serverCertificate), \(files.serverKey)

                Serve with TLS:
                  fcm-registry serve --tls-cert \(files.serverCertificate) --tls-key \(files.serverKey) --tls-port 443

                Trust the CA (each runtime has its own way):
                  Python (requests, google-auth):  export REQUESTS_CA_BUNDLE=\(files.caCertificate)
                  Python (httpx), Go, OpenSSL:     export SSL_CERT_FILE=\(files.caCertificate)
                  Node.js:                         export NODE_EXTRA_CA_CERTS=\(files.caCertificate)
                  Java:  keytool -importcert -noprompt -alias fcm-registry -file \(files.caCertificate) \\
                           -keystore fcm-registry.jks -storepass changeit   (then -Djavax.net.ssl.trustStore=fcm-registry.jks)
                  Debian, system-wide: cp \(files.caCertificate) /usr/local/share/ca-certificates/fcm-registry.crt && update-ca-certificates

                Map the host names to this server (a hosts entry):
                  127.0.0.1 fcm.googleapis.com iid.googleapis.com oauth2.googleapis.com iamcredentials.googleapis.com
                """)
        }
    }
}
