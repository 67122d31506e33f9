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
        #expect(try await targetStore.insertWebhookCopy(copy, into: to.rowID))
        #expect(try await targetStore.insertWebhookCopy(copy, into: to.rowID) == false)
        #expect(try await targetStore.webhookCopies(of: to.rowID) == [copy])
        let shown = try #require(try await targetStore.webhook(created.webhook.id, of: to.rowID))
        #expect(shown.url == created.webhook.url && shown.events == created.webhook.events)
        #expect(shown.sent == 0 && shown.backlog == 0 && shown.disabledAt == nil)
    }

    @Test func aDisabledWebhookStaysDisabled() async throws {
        let (target, project) = try await makeRegistry()
        let store = try #require(target.store as? any RegistryBackend)
        let disabled = WebhookCopy(
            publicID: "wh_2disabledbefore", url: "https://93.184.215.14/h", events: WebhookEventType.mask([.tokenUnregistered]),
            secret: "whsec_c2VjcmV0", previousSecret: nil, previousSecretUntil: nil, createdAt: 1_000, disabledAt: 2_000,
            disabledReason: "failing for 5 days")
        #expect(try await store.insertWebhookCopy(disabled, into: project.rowID))
        let shown = try #require(try await store.webhook("wh_2disabledbefore", of: project.rowID))
        #expect(shown.disabledReason == "failing for 5 days")
        #expect(shown.disabledAt == EpochMilliseconds.date(2_000))
    }
}
