import Delivery
import Foundation
import HTTPTypes
import Synchronization
import TestBackends
import Testing

/// Every field FCM's v1 reference documents today goes through the relay untouched: a v1 message
/// using all of them, relayed to a scripted FCM, arrives with the same JSON (the token added).
///
/// The list, from firebase.google.com/docs/reference/fcm/rest/v1/projects.messages (Message,
/// Notification, AndroidConfig, AndroidNotification, LightSettings, AndroidFcmOptions, ApnsConfig,
/// ApnsFcmOptions, WebpushConfig, WebpushFcmOptions, FcmOptions) and the AndroidConfigV2 preview
/// (firebase.google.com/docs/cloud-messaging/send/v2-api): when FCM documents a new field, it
/// belongs here.
@Suite(.onEveryBackend, .enabled(if: ServeProcess.available, "needs the built fcm-registry"))
struct RelayDocumentedFieldsTests {
    static let androidNotification = #"""
        {"title":"t","body":"b","icon":"ic","color":"#rrggbb","sound":"default","tag":"tg","click_action":"OPEN",
         "body_loc_key":"bk","body_loc_args":["1"],"title_loc_key":"tk","title_loc_args":["2"],"channel_id":"ch",
         "ticker":"tick","sticky":true,"event_time":"2026-01-01T00:00:00Z","local_only":true,
         "notification_priority":"PRIORITY_HIGH","default_sound":false,"default_vibrate_timings":false,
         "default_light_settings":false,"vibrate_timings":["0.5s","1s"],"visibility":"PUBLIC","notification_count":3,
         "light_settings":{"color":{"red":0.5,"green":0.25,"blue":1,"alpha":1},"light_on_duration":"1s",
           "light_off_duration":"2s"},
         "image":"https://example.com/a.png","bypass_proxy_notification":true,"proxy":"DENY"}
        """#

    static let common = #"""
        "name":"ignored",
        "data":{"k":"v"},
        "notification":{"title":"T","body":"B","image":"https://example.com/n.png"},
        "android":{"collapse_key":"c","priority":"HIGH","ttl":"3600s","restricted_package_name":"com.example",
          "data":{"a":"1"},"notification":\#(androidNotification),"fcm_options":{"analytics_label":"al"},
          "direct_boot_ok":true,"bandwidth_constrained_ok":true,"restricted_satellite_ok":true},
        "webpush":{"headers":{"TTL":"60","Urgency":"high"},"data":{"w":"1"},
          "notification":{"title":"w","requireInteraction":true,"actions":[{"action":"a","title":"A"}]},
          "fcm_options":{"link":"https://example.com/","analytics_label":"wl"}},
        "apns":{"headers":{"apns-priority":"10","apns-push-type":"liveactivity"},
          "payload":{"aps":{"alert":{"title":"x","loc-args":["1"]},"badge":2,"content-available":1,
            "timestamp":1767225600,"event":"update","content-state":{"score":"1-0"}},"custom":{"nested":[1,2]}},
          "fcm_options":{"analytics_label":"apl","image":"https://example.com/i.png"},
          "live_activity_token":"la-token-1"},
        "fcm_options":{"analytics_label":"fl"}
        """#

    static let remoteNotification = #"""
        "android_v2":{"remote_notification":{"notification":{"title":"t","body":"b","icon":"ic","color":"#112233",
          "sound":"s","tag":"tg","click_action":"OPEN","body_loc_key":"bk","body_loc_args":["1"],"title_loc_key":"tk",
          "title_loc_args":["2"],"channel_id":"ch","ticker":"tick","sticky":true,"event_time":"2026-01-01T00:00:00Z",
          "local_only":true,"notification_priority":"PRIORITY_MAX","default_sound":true,"default_vibrate_timings":true,
          "default_light_settings":true,"vibrate_timings":["1s"],"visibility":"PRIVATE","notification_count":1,
          "light_settings":{"color":{"red":1},"light_on_duration":"1s","light_off_duration":"1s"},
          "image":"https://example.com/v2.png","id":7},
          "mutable_content":true,"use_as_v1_data_message":true},
          "collapse_key":"c2","data":{"b":"2"},"ttl":"60s","restricted_package_name":"com.example",
          "fcm_options":{"analytics_label":"v2"},"direct_boot_ok":true,"bandwidth_constrained_ok":false,
          "restricted_satellite_ok":true}
        """#

    static let backgroundSync = #"""
        "android_v2":{"background_sync":{},"data":{"sync":"1"},"ttl":"0s","collapse_key":"s"}
        """#

    @Test(arguments: [remoteNotification, backgroundSync])
    func everyDocumentedFieldReachesFCMUnchanged(androidV2: String) async throws {
        let message = "{" + Self.common + "," + androidV2 + "}"
        let received = Mutex<[[UInt8]]>([])
        let certificates = try TestCertificates()
        let server = try await TestHTTP2Server(certificates: certificates.files) { body in
            received.withLock { $0.append(body) }
            return TestHTTP2Server.Reply(status: 200, body: Array(#"{"name":"projects/test-app/messages/1"}"#.utf8))
        }
        var options = RelayHarness.testOptions
        options.caFile = certificates.files.caCertificate
        var failure: (any Error)?
        do {
            try await RelayHarness.run(options: options, sendingTo: "https://127.0.0.1:\(server.port)") { harness in
                let reply = try await harness.client.call(
                    .post, "/v1/projects/relay-app/messages:send",
                    body: #"{"message":{"token":"\#(token(1))",\#(message.dropFirst())}"#)
                #expect(reply.status == .ok)
                let bodies = received.withLock { $0 }
                #expect(bodies.count == 1)
                let upstream = try JSONDecoder().decode(JSON.self, from: Data(try #require(bodies.first)))
                guard case .object(var expected) = try JSONDecoder().decode(JSON.self, from: Data(message.utf8)) else {
                    Issue.record("not an object")
                    return
                }
                // `name` is output only: FCM names the message, the sender does not.
                expected["name"] = nil
                expected["token"] = .string(token(1))
                #expect(upstream == ["message": .object(expected)])
            }
        } catch {
            failure = error
        }
        await server.stop()
        withExtendedLifetime(certificates) {}
        if let failure { throw failure }
    }
}
