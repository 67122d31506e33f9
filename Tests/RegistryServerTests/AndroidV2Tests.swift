import Foundation
import Hummingbird
import Registry
import TestBackends
import Testing

/// v1 `messages:send` takes `android_v2`, FCM's preview Android shape (`AndroidConfigV2`): a
/// `remote_notification` or a `background_sync`, checked as FCM's JSON mapping checks it and logged
/// as sent.
@Suite("v1 android_v2", .onEveryBackend)
struct AndroidV2Tests {
    private static func send(_ client: Fixture.Client, _ androidV2: String) async throws -> Reply {
        try await client.call(
            .post, "/v1/projects/test-app/messages:send",
            body: #"{"message":{"token":"\#(token(1))","android_v2":\#(androidV2)}}"#)
    }

    @Test("remote_notification and background_sync are accepted and logged as sent")
    func accepted() async throws {
        let fixture = try await Fixture.make()
        _ = try await fixture.registry.registerToken(token(1), in: fixture.project)
        try await fixture.test { client in
            let remote =
                #"{"remote_notification":{"notification":{"title":"Gate B12","body":"Boarding","channel_id":"trips","notification_count":2,"sticky":true,"light_settings":{"color":{"red":1}}},"mutable_content":true,"use_as_v1_data_message":false},"ttl":"60s","collapse_key":"trip","data":{"k":"v"},"bandwidth_constrained_ok":true,"restricted_satellite_ok":false,"direct_boot_ok":true,"fcm_options":{"analytics_label":"l"},"restricted_package_name":"com.example"}"#
            let reply = try await Self.send(client, remote)
            #expect(reply.status == .ok)
            #expect(reply.json?["name"]?.string?.hasPrefix("projects/test-app/messages/") == true)
            #expect(try await Self.send(client, #"{"background_sync":{},"data":{"sync":"1"}}"#).status == .ok)
            // camelCase, as Google's generated clients write it, is the same field.
            #expect(
                try await client.call(
                    .post, "/v1/projects/test-app/messages:send",
                    body: #"{"message":{"token":"\#(token(1))","androidV2":{"backgroundSync":{},"directBootOk":true}}}"#
                ).status == .ok)
            let logged = try await fixture.loggedBodies()
            #expect(logged.count == 3)
            #expect(
                logged[0]["platform"]?["android_v2"] == ["background_sync": [:], "direct_boot_ok": true])
            #expect(logged[1]["platform"]?["android_v2"] == ["background_sync": [:], "data": ["sync": "1"]])
            let sent = try JSONDecoder().decode(JSON.self, from: Data(remote.utf8))
            #expect(logged[2]["platform"]?["android_v2"] == sent)
        }
    }

    @Test(
        "a bad android_v2 is 400 INVALID_ARGUMENT naming the field, and nothing is sent",
        arguments: [
            (#"{"remote_notification":{},"background_sync":{}}"#, "message.android_v2"),
            (#"{"data":{"k":"v"}}"#, "message.android_v2"),
            (#"{"background_sync":null,"remote_notification":null}"#, "message.android_v2"),
            (#""urgent""#, "message.android_v2"),
            (#"{"background_sync":{},"priority":"HIGH"}"#, "message.android_v2"),
            (#"{"background_sync":{"when":"later"}}"#, "message.android_v2.background_sync"),
            (#"{"background_sync":[]}"#, "message.android_v2.background_sync"),
            (#"{"background_sync":{},"ttl":"soon"}"#, "message.android_v2.ttl"),
            (#"{"background_sync":{},"ttl":"2419201s"}"#, "message.android_v2.ttl"),
            (#"{"background_sync":{},"direct_boot_ok":"yes"}"#, "message.android_v2.direct_boot_ok"),
            (#"{"background_sync":{},"bandwidth_constrained_ok":1}"#, "message.android_v2.bandwidth_constrained_ok"),
            (#"{"background_sync":{},"data":{"n":1}}"#, "message.android_v2.data[n]"),
            (
                #"{"background_sync":{},"fcm_options":{"analytics_label":3}}"#,
                "message.android_v2.fcm_options.analytics_label"
            ),
            (#"{"remote_notification":{"urgent":true}}"#, "message.android_v2.remote_notification"),
            (
                #"{"remote_notification":{"mutable_content":"true"}}"#,
                "message.android_v2.remote_notification.mutable_content"
            ),
            (
                #"{"remote_notification":{"notification":{"title":7}}}"#,
                "message.android_v2.remote_notification.notification.title"
            ),
            (
                #"{"remote_notification":{"notification":{"notification_count":1.5}}}"#,
                "message.android_v2.remote_notification.notification.notification_count"
            ),
            (
                #"{"remote_notification":{"notification":{"proxy":"ALLOW"}}}"#,
                "message.android_v2.remote_notification.notification"
            ),
        ])
    func refused(androidV2: String, field: String) async throws {
        let fixture = try await Fixture.make()
        _ = try await fixture.registry.registerToken(token(1), in: fixture.project)
        try await fixture.test { client in
            let reply = try await Self.send(client, androidV2)
            #expect(reply.status == .badRequest)
            #expect(reply.json?["error"]?["status"] == "INVALID_ARGUMENT")
            let details = reply.json?["error"]?["details"]?.array ?? []
            #expect(details.first?["fieldViolations"]?.array?.first?["field"] == .string(field))
            #expect(try await fixture.loggedBodies().isEmpty)
        }
    }
}
