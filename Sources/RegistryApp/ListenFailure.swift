import FCMWire
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
        guard let error = error as? IOError else {
            return ConfigurationError(
                description: ConfigurationWording.cannotListen(
                    host: host, port: port, option: option, reason: "\(error)"))
        }
        let description =
            switch error.errnoCode {
            case EADDRINUSE: ConfigurationWording.portInUse(port, option: option)
            case EACCES: ConfigurationWording.portNeedsPrivilege(port, option: option)
            case EADDRNOTAVAIL: ConfigurationWording.notAnAddressHere(host)
            default:
                ConfigurationWording.cannotListen(
                    host: host, port: port, option: option, reason: String(cString: strerror(error.errnoCode)))
            }
        return ConfigurationError(description: description)
    }
}
