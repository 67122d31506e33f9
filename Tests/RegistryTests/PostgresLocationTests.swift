import RegistryPostgres
import Testing

@Suite("PostgreSQL URLs for --db")
struct PostgresLocationTests {
    @Test("A full URL: user, password, host, port, database, TLS, CA file and schema")
    func full() throws {
        let location = try PostgresLocation(
            parsing: "postgres://registry:s%40cret@db.internal:6543/fcm?sslmode=verify-full&sslrootcert=/etc/ca.pem&search_path=push")
        #expect(location.host == "db.internal")
        #expect(location.port == 6543)
        #expect(location.username == "registry")
        #expect(location.password == "s@cret")
        #expect(location.database == "fcm")
        #expect(location.tls == .verifyFull)
        #expect(location.rootCertificatePath == "/etc/ca.pem")
        #expect(location.schema == "push")
    }

    @Test("Defaults: port 5432, the user's database, sslmode=prefer; postgresql:// and IPv6 hosts")
    func defaults() throws {
        let location = try PostgresLocation(parsing: "postgresql://app@[::1]")
        #expect(location.host == "::1")
        #expect(location.port == 5432)
        #expect(location.database == "app")
        #expect(location.tls == .prefer)
        #expect(location.password == nil)
        #expect(location.description == "postgres://app@[::1]:5432/app?sslmode=prefer")
        #expect(try PostgresLocation(parsing: "postgres://a@h/d?options=-c%20search_path%3Dx").schema == "x")
    }

    @Test("The password never appears in the description or in an error")
    func redacted() throws {
        let location = try PostgresLocation(parsing: "postgres://registry:hunter2@db:5432/fcm?sslmode=require")
        #expect(location.description == "postgres://registry:***@db:5432/fcm?sslmode=require")
        for bad in [
            "postgres://registry:hunter2@db/fcm?sslmode=sometimes",
            "postgres://registry:hunter2@db/fcm?color=blue",
            "postgres://registry:hunter2@db/fcm?search_path=a;drop",
            "postgres://registry:hunter2@db/fcm?sslrootcert=/ca.pem",
            "postgres://:hunter2@db/fcm",
            "postgres://registry:hunter2@/fcm",
        ] {
            let error = #expect(throws: PostgresLocationError.self) { try PostgresLocation(parsing: bad) }
            #expect(error.map { !$0.description.contains("hunter2") } == true, "\(bad)")
        }
    }

    @Test("Only postgres:// and postgresql:// are URLs; anything else is an SQLite path")
    func urlOrPath() {
        #expect(PostgresLocation.isURL("postgres://a@b/c"))
        #expect(PostgresLocation.isURL("PostgreSQL://a@b/c"))
        #expect(!PostgresLocation.isURL("registry.sqlite"))
        #expect(!PostgresLocation.isURL("/var/lib/postgres/registry.sqlite"))
    }
}
