import Hummingbird
import Registry
import TestBackends
import Testing

@Suite("POST/GET /fcm/notification", .onEveryBackend)
struct DeviceGroupAPITests {
    @Test("create answers {\"notification_key\":\"APA91b…\"}; malformed tokens are dropped")
    func create() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let reply = try await client.groups(
                #"{"operation":"create","notification_key_name":"appUser-Chris","registration_ids":["bk3RNwTe3H0:CI2k_HHwgIpoDKCIZvvDMExUdFQ3P1","cR1rjyj4_Kc:APA91bGusqbypSuMdsh7jSNrW4nzsM","not a token"]}"#
            )
            #expect(reply.status == .ok)
            let key = try #require(reply.json?["notification_key"]?.string)
            #expect(key.hasPrefix("APA91b") && !key.contains(":"))
            #expect(reply.json == ["notification_key": .string(key)])
            #expect(
                try await fixture.registry.store.group(named: "appUser-Chris", in: fixture.project)?.memberCount == 2)
        }
    }

    @Test(arguments: [
        (
            #"{"operation":"create","notification_key_name":"g","registration_ids":["bad token","also bad"]}"#,
            "no valid registration ids"
        ),
        (#"{"operation":"create","notification_key_name":"g","registration_ids":[]}"#, "no valid registration ids"),
        (#"{"notification_key_name":"g","registration_ids":["a"]}"#, "operation is required: create, add or remove"),
        (
            #"{"operation":"rename","notification_key_name":"g","registration_ids":["a"]}"#,
            "unknown operation 'rename': use create, add or remove"
        ),
        (#"{"operation":"create","registration_ids":["a"]}"#, "notification_key_name is required to create a group"),
        (#"{"operation":"create","notification_key_name":"g"}"#, "registration_ids is required"),
        (#"{"operation":"add","registration_ids":["a"]}"#, "notification_key is required to add members"),
        (
            #"{"operation":"create","notification_key_name":"g","registration_ids":"a"}"#,
            "registration_ids must be an array of strings"
        ),
        (
            #"{"operation":"create","notification_key_name":"g","registration_ids":["a",1]}"#,
            "registration_ids[1] must be a string"
        ),
        (#"{"operation":true,"notification_key_name":"g","registration_ids":["a"]}"#, "operation must be a string"),
        (
            #"{"operation":"create","notification_key_name":"","registration_ids":["a"]}"#,
            "notification_key_name must not be empty"
        ),
        (#"not json"#, "the request body is not valid JSON"),
        (#"["create"]"#, "the request body must be a JSON object"),
        (
            #"{"operation":"add","notification_key":"APA91bnot-a-key","registration_ids":["a"]}"#,
            "Error decrypting GroupToken"
        ),
        (#"{"operation":"remove","notification_key":"hello","registration_ids":["a"]}"#, "Error decrypting GroupToken"),
    ])
    func badRequests(body: String, error: String) async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let reply = try await client.groups(body)
            #expect(reply.status == .badRequest)
            #expect(reply.json == ["error": .string(error)])
            #expect(try await fixture.registry.store.groups(in: fixture.project, prefix: "", after: nil, limit: 10, incompleteOnly: false).items.isEmpty)
        }
    }

    @Test("The same name again is 'notification_key already exists'")
    func duplicateName() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            _ = try await client.createGroup("g", [token(1)])
            let reply = try await client.groups(
                #"{"operation":"create","notification_key_name":"g","registration_ids":["\#(token(2))"]}"#)
            #expect(reply.status == .badRequest)
            #expect(reply.json == ["error": "notification_key already exists"])
        }
    }

    @Test("add and remove by key; a key from GET works like the one from create; the name is checked")
    func addAndRemove() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let created = try await client.createGroup("g", [token(1)])
            let lookUp = try await client.call(.get, "/fcm/notification?notification_key_name=g")
            #expect(lookUp.status == .ok)
            let fresh = try #require(lookUp.json?["notification_key"]?.string)
            #expect(fresh != created)
            let again = try await client.call(.get, "/fcm/notification?notification_key_name=g")
            #expect(again.json?["notification_key"]?.string != fresh)

            let add = try await client.groups(
                #"{"operation":"add","notification_key_name":"g","notification_key":"\#(fresh)","registration_ids":["\#(token(2))"]}"#
            )
            #expect(add.status == .ok)
            #expect(add.json == ["notification_key": .string(fresh)])
            let mismatch = try await client.groups(
                #"{"operation":"add","notification_key_name":"h","notification_key":"\#(created)","registration_ids":["\#(token(3))"]}"#
            )
            #expect(mismatch.status == .badRequest)
            #expect(
                mismatch.json == ["error": "notification_key_name doesn't match the group name of the notification_key"]
            )
            let remove = try await client.groups(
                #"{"operation":"remove","notification_key":"\#(created)","registration_ids":["\#(token(1))"]}"#)
            #expect(remove.json == ["notification_key": .string(created)])
            let members = try await fixture.registry.store.groupMembers(
                named: "g", in: fixture.project, after: nil, limit: 10)
            #expect(members?.1.items.map(\.name) == [token(2)])
        }
    }

    @Test("The 21st member is refused with a clear message and the group is unchanged")
    func twentyFirstMember() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let key = try await client.createGroup("g", (1...20).map(token))
            let reply = try await client.groups(
                #"{"operation":"add","notification_key":"\#(key)","registration_ids":["\#(token(21))"]}"#)
            #expect(reply.status == .badRequest)
            #expect(reply.json == ["error": "too many registration ids: a device group holds at most 20 members"])
            #expect(try await fixture.registry.store.group(named: "g", in: fixture.project)?.memberCount == 20)
        }
    }

    @Test("Removing the last member deletes the group; the name is free again; old keys do not reach the new group")
    func lastMember() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let old = try await client.createGroup("g", [token(1)])
            _ = try await client.groups(
                #"{"operation":"remove","notification_key":"\#(old)","registration_ids":["\#(token(1))"]}"#)
            let gone = try await client.call(.get, "/fcm/notification?notification_key_name=g")
            #expect(gone.status == .badRequest)
            #expect(gone.json == ["error": "notification_key not found"])
            let addToGone = try await client.groups(
                #"{"operation":"add","notification_key":"\#(old)","registration_ids":["\#(token(2))"]}"#)
            #expect(addToGone.json == ["error": "notification_key not found"])
            _ = try await client.createGroup("g", [token(3)])
            let oldKey = try await client.groups(
                #"{"operation":"add","notification_key":"\#(old)","registration_ids":["\#(token(4))"]}"#)
            #expect(oldKey.json == ["error": "notification_key not found"])
            #expect(try await fixture.registry.store.group(named: "g", in: fixture.project)?.memberCount == 1)
        }
    }

    @Test("GET without a name is a 400 that says so")
    func lookUpWithoutName() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let reply = try await client.call(.get, "/fcm/notification")
            #expect(reply.status == .badRequest)
            #expect(reply.json == ["error": "notification_key_name is required"])
        }
    }
}
