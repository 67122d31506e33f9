import NIOCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension ConfigurationError {
    /// Why a listener cannot take its port, in the words an operator acts on (`port 8080 is in
    /// use`), rather than NIO's (`bind(descriptor:ptr:bytes:): Address already in use) (errno: 98)`).
    /// - Parameter option: the flag and variable that chose the port.
    static func cannotListen(host: String, port: Int, option: String, because error: any Error) -> ConfigurationError {
        let hostOption = "--host / FCM_REGISTRY_HOST"
        guard let error = error as? IOError else {
            return ConfigurationError(
                description: "cannot listen on \(host):\(port) (\(option), \(hostOption)): \(error)")
        }
        let description =
            switch error.errnoCode {
            case EADDRINUSE: "port \(port) is in use (\(option)): another process listens on it"
            case EACCES: "port \(port) needs root or CAP_NET_BIND_SERVICE (\(option))"
            case EADDRNOTAVAIL: "\(host) is not an address of this machine (\(hostOption))"
            default:
                "cannot listen on \(host):\(port) (\(option), \(hostOption)): \(String(cString: strerror(error.errnoCode)))"
            }
        return ConfigurationError(description: description)
    }
}
