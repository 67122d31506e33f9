// Parse-and-check throughput of topic conditions, release build, no package needed:
//
//   swiftc -O -parse-as-library -module-name ConditionsBenchmark \
//     Sources/Conditions/*.swift Benchmarks/conditions/main.swift -o /tmp/conditions-benchmark
//   /tmp/conditions-benchmark
//
// Conditions is standard-library only, so its sources compile straight into this program.

@main
enum ConditionsBenchmark {
    static let conditions = [
        "'TopicA' in topics && ('TopicB' in topics || 'TopicC' in topics) && !('TopicD' in topics) || 'TopicE' in topics",
        "('stock-GOOG' in topics || 'industry-tech' in topics) && !('muted' in topics) && ('weather' in topics || 'news' in topics)",
    ]

    static func main() {
        let clock = ContinuousClock()
        for source in conditions {
            var checked = 0
            var valid = 0
            let iterations = 200_000
            let elapsed = clock.measure {
                for _ in 0..<iterations {
                    if let condition = try? Condition(parsing: source, dialect: .v1) {
                        valid += condition.topicCount
                    }
                    checked += 1
                }
            }
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            print(
                "\(Int(Double(checked) / seconds)) conditions/s (parse, dialect checks, warnings incl. truth table): \(source)"
            )
            precondition(valid == iterations * 5)
        }
    }
}
