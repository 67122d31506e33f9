#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// The process's open-file limit, raised from the soft to the hard limit at start: every idle
/// client holds a descriptor, and the common soft limit of 1,024 is far below what a server needs.
public enum FileDescriptorLimit {
    public static func raiseToHard() -> (soft: UInt64, hard: UInt64) {
        #if os(Linux)
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #else
        let resource = RLIMIT_NOFILE
        #endif
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return (0, 0) }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(resource, &raised) == 0 { limit = raised }
        }
        return (UInt64(limit.rlim_cur), UInt64(limit.rlim_max))
    }
}
