import Registry

/// `message.android_v2`, FCM's preview Android shape (`AndroidConfigV2`, 2026): a message is either a
/// `remote_notification` (urgent, user-visible) or a `background_sync` (non-urgent data), and its
/// priority follows from which. It is checked field by field as Google's JSON mapping checks it
/// (unknown names and wrong types are refused with the field's path) and kept as sent, so the relay
/// forwards it unchanged. Field lists: the v1 reference's `AndroidConfigV2`, `AndroidRemoteNotification`
/// and `AndroidNotificationV2` (firebase.google.com/docs/reference/fcm/rest/v1/projects.messages).
extension V1Codec {
    enum FieldType {
        case string, bool, integer, duration, stringMap, stringList, object
    }

    static let androidV2Fields: [String: FieldType] = [
        "collapse_key": .string, "data": .stringMap, "ttl": .duration, "restricted_package_name": .string,
        "fcm_options": .object, "direct_boot_ok": .bool, "bandwidth_constrained_ok": .bool,
        "restricted_satellite_ok": .bool, "remote_notification": .object, "background_sync": .object,
    ]

    static let remoteNotificationFields: [String: FieldType] = [
        "notification": .object, "mutable_content": .bool, "use_as_v1_data_message": .bool,
    ]

    static let androidNotificationV2Fields: [String: FieldType] = [
        "title": .string, "body": .string, "icon": .string, "color": .string, "sound": .string, "tag": .string,
        "click_action": .string, "body_loc_key": .string, "body_loc_args": .stringList, "title_loc_key": .string,
        "title_loc_args": .stringList, "channel_id": .string, "ticker": .string, "sticky": .bool,
        "event_time": .string, "local_only": .bool, "notification_priority": .string, "default_sound": .bool,
        "default_vibrate_timings": .bool, "default_light_settings": .bool, "vibrate_timings": .stringList,
        "visibility": .string, "notification_count": .integer, "light_settings": .object, "image": .string,
        "id": .integer,
    ]

    /// Reads `android_v2` (or `androidV2`) into `message.platform["android_v2"]`; the pipeline's
    /// options come from it where no `android` block sets them.
    static func readAndroidV2(_ value: JSONValue, into message: inout Message) throws(Invalid) {
        let path = "message.android_v2"
        guard let config = try checked(snakeCased(value), path, androidV2Fields) else { return }
        let kinds = ["remote_notification", "background_sync"].filter { config[$0] != nil }
        guard kinds.count == 1 else {
            throw Invalid(
                description: "Exactly one of remote_notification or background_sync must be set in \(path)", field: path
            )
        }
        if let remote = try checked(
            config["remote_notification"], path + ".remote_notification", remoteNotificationFields)
        {
            _ = try checked(
                remote["notification"], path + ".remote_notification.notification", androidNotificationV2Fields)
        }
        // AndroidBackgroundSyncMessage has no fields (yet): `{}` is the whole of it.
        _ = try checked(config["background_sync"], path + ".background_sync", [:])
        _ = try checked(config["fcm_options"], path + ".fcm_options", ["analytics_label": .string])
        if let ttl = config["ttl"]?.string {
            guard let seconds = GoogleDuration.seconds(ttl), seconds <= Double(MessageRules.maximumTimeToLive) else {
                throw Invalid(
                    description:
                        "Invalid value at '\(path).ttl' (type.googleapis.com/google.protobuf.Duration), \"\(ttl)\"",
                    field: path + ".ttl")
            }
            if message.platform["android"] == nil { message.options.timeToLive = seconds.rounded(.down) }
        }
        if message.platform["android"] == nil {
            message.options.collapseKey = config["collapse_key"]?.string
            message.options.restrictedPackageName = config["restricted_package_name"]?.string
            message.options.priority = kinds == ["remote_notification"] ? .high : .normal
        }
        message.platform["android_v2"] = .object(config)
    }

    /// An object whose fields are all in `fields` and of their type; `nil` when absent or `null`.
    private static func checked(_ value: JSONValue?, _ path: String, _ fields: [String: FieldType]) throws(Invalid)
        -> [String: JSONValue]?
    {
        guard let object = try object(value, path, strings: []) else { return nil }
        for key in object.keys.sorted() {
            guard let type = fields[key] else {
                throw Invalid(
                    description:
                        "Invalid JSON payload received. Unknown name \"\(key)\" at '\(path)': Cannot find field.",
                    field: path)
            }
            try check(object[key]!, type, "\(path).\(key)")
        }
        return object
    }

    private static func check(_ value: JSONValue, _ type: FieldType, _ field: String) throws(Invalid) {
        let typeName: String
        switch type {
        case .string, .duration:
            if value.string != nil { return }
            typeName = "TYPE_STRING"
        case .bool:
            if case .bool = value { return }
            typeName = "TYPE_BOOL"
        case .integer:
            if case .number(let number) = value, number == number.rounded(), abs(number) <= Double(Int32.max) { return }
            if let text = value.string, Int32(text) != nil { return }
            typeName = "TYPE_INT32"
        case .stringMap:
            _ = try stringMap(value, field)
            return
        case .stringList:
            if case .array(let items) = value, items.allSatisfy({ $0.string != nil }) { return }
            typeName = "TYPE_STRING"
        case .object:
            if value.object != nil { return }
            typeName = "TYPE_MESSAGE"
        }
        throw Invalid(description: "Invalid value at '\(field)' (\(typeName))", field: field)
    }
}
