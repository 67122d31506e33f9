import Foundation
import TestBackends
import Testing

@testable import Registry

/// Webhooks as `fcm-registry copy` moves them: the same id, URL, events and secrets (the one
/// before a rotation too, while it signs), disabled or not; counters from 0; a second copy adds
/// nothing.
@Suite("Webhooks copied", .onEveryBackend)
struct WebhookCopyTests {
    @Test func aWebhookIsCopiedWithItsSecretsAndOnlyOnce() async throws {
        let (source, from) = try await makeRegistry()
        let store = try #require(source.store as? any RegistryBackend)
        let created = try await store.createWebhook(
            project: from.rowID, url: "https://93.184.215.14/hooks", events: [.deliveryFailed, .messageCompleted],
            limit: 16, now: Date())
        let rotated = try #require(try await store.rotateWebhookSecret(created.webhook.id, of: from.rowID, now: Date()))
        let copies = try await store.webhookCopies(of: from.rowID)
        #expect(copies.count == 1)
        let copy = try #require(copies.first)
        #expect(copy.publicID == created.webhook.id)
        #expect(copy.secret == rotated.secret)
        #expect(copy.previousSecret == created.secret)
        #expect(copy.previousSecretUntil != nil)
        #expect(copy.events == WebhookEventType.mask([.deliveryFailed, .messageCompleted]))

        let (target, to) = try await makeRegistry()
        let targetStore = try #require(target.store as? any RegistryBackend)
        #expect(try await targetStore.copyWebhook(copy, into: to.rowID) == .copied)
        #expect(try await targetStore.webhookCopies(of: to.rowID) == [copy])
        // Printed, a copy never shows its secrets.
        #expect(!"\(copy)".contains(copy.secret) && !String(reflecting: copy).contains(copy.secret))
        let shown = try #require(try await targetStore.webhook(created.webhook.id, of: to.rowID))
        #expect(shown.url == created.webhook.url && shown.events == created.webhook.events)
        #expect(shown.sent == 0 && shown.backlog == 0 && shown.disabledAt == nil)

        // Rotated again and disabled at the source, then copied again: brought up to date, once.
        var changed = copy
        changed.previousSecret = copy.secret
        changed.secret = "whsec_bmV3IHNlY3JldA=="
        changed.url = "https://93.184.215.14/other"
        changed.disabledAt = 5_000
        changed.disabledReason = "failing for 3 days"
        #expect(try await targetStore.copyWebhook(changed, into: to.rowID) == .copied)
        #expect(try await targetStore.webhookCopies(of: to.rowID) == [changed])

        // Another project's id is not taken over.
        let (other, _) = try await target.createProject(projectId: "other-app", senderId: "223456789012")
        #expect(try await targetStore.copyWebhook(changed, into: other.rowID) == .idTakenElsewhere)
        #expect(try await targetStore.webhookCopies(of: other.rowID).isEmpty)
    }

    @Test func aCopyKeepsToTheProjectsBoundOfWebhooks() async throws {
        let (target, project) = try await makeRegistry()
        let store = try #require(target.store as? any RegistryBackend)
        for _ in 0..<WebhookRules.webhooksPerProject {
            _ = try await store.createWebhook(
                project: project.rowID, url: "https://93.184.215.14/h", events: [.messageCompleted],
                limit: WebhookRules.webhooksPerProject, now: Date())
        }
        let extra = WebhookCopy(
            publicID: "wh_2onemoreaddedby", url: "https://93.184.215.14/h", events: 4, secret: "whsec_c2VjcmV0",
            previousSecret: nil, previousSecretUntil: nil, createdAt: 1_000, disabledAt: nil, disabledReason: nil)
        #expect(try await store.copyWebhook(extra, into: project.rowID) == .projectFull)
        #expect(try await store.webhookCopies(of: project.rowID).count == WebhookRules.webhooksPerProject)
    }

    @Test func aDisabledWebhookStaysDisabled() async throws {
        let (target, project) = try await makeRegistry()
        let store = try #require(target.store as? any RegistryBackend)
        let disabled = WebhookCopy(
            publicID: "wh_2disabledbefore", url: "https://93.184.215.14/h", events: WebhookEventType.mask([.tokenUnregistered]),
            secret: "whsec_c2VjcmV0", previousSecret: nil, previousSecretUntil: nil, createdAt: 1_000, disabledAt: 2_000,
            disabledReason: "failing for 5 days")
        #expect(try await store.copyWebhook(disabled, into: project.rowID) == .copied)
        let shown = try #require(try await store.webhook("wh_2disabledbefore", of: project.rowID))
        #expect(shown.disabledReason == "failing for 5 days")
        #expect(shown.disabledAt == EpochMilliseconds.date(2_000))
    }
}

/// The settings step of `copy` as a whole, store to store: relay settings, own rate, mirror
/// settings and webhooks onto the target's project of the same id, nothing for a project the
/// target lacks.
@Suite("Project settings copied", .onEveryBackend)
struct ProjectSettingsCopyTests {
    @Test func relayRateMirrorAndWebhooksReachTheProjectOfTheSameID() async throws {
        let (source, project) = try await makeRegistry()
        let from = try #require(source.store as? any RegistryBackend)
        let mirror = ChannelSettings(
            channel: "fcm-v1", settings: ["upstream": .string("https://g")], secrets: ["privateKey": .string("m")])
        try await from.setRelay(OutboxTests.settings, for: project)
        try await from.setSendRate(400, for: project)
        try await from.setMirrorSettings(mirror, for: project)
        let hook = try await from.createWebhook(
            project: project.rowID, url: "https://93.184.215.14/h", events: [.deliveryFailed], limit: 16, now: Date())
        let (lonely, _) = try await source.createProject(projectId: "only-in-source", senderId: "323456789012")
        try await from.setRelay(OutboxTests.settings, for: lonely)

        let target = try await RegistryService(store: TestBackend.makeStore())
        // The target's row ids differ from the source's: matched by the project's id.
        _ = try await target.createProject(projectId: "first-in-target", senderId: "423456789012")
        let (copyOfProject, _) = try await target.createProject(projectId: project.projectId, senderId: project.senderId)
        let to = try #require(target.store as? any RegistryBackend)

        let tally = try await ProjectSettingsCopy.copy(from: from, to: to)
        #expect(tally == ProjectSettingsCopy.Tally(relays: 1, mirrors: 1, webhooks: 1, skipped: []))
        #expect(try await to.relaySettings() == [copyOfProject.rowID: OutboxTests.settings])
        #expect(try await to.sendRates() == [copyOfProject.rowID: 400])
        #expect(try await to.mirrorSettings(of: copyOfProject) == mirror)
        #expect(try await to.webhookCopies(of: copyOfProject.rowID).map(\.secret) == [hook.secret])
        #expect(try await ProjectSettingsCopy.copy(from: from, to: to) == tally)
        #expect(try await to.webhookCopies(of: copyOfProject.rowID).count == 1)
    }
}
