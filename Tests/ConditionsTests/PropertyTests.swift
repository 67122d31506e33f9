import Conditions
import PropertyBased
import Testing

/// Laws of the condition language, checked on random conditions and random input.
@Suite("Condition laws")
struct PropertyTests {
    @Test("Printing then parsing gives the same tree, and the canonical form is a fixed point")
    func printParseRoundTrip() async {
        await propertyCheck(count: 400, input: Gen.uint64()) { seed in
            var random = SplitMix(seed: seed)
            let model = ModelCondition.random(using: &random, depth: 5)
            let source = model.source(using: &random)
            let parsed = try Condition(parsing: source, dialect: .extended)
            let reparsed = try Condition(parsing: parsed.canonical, dialect: .extended)
            #expect(reparsed.expression.hasSameStructure(as: parsed.expression), "\(source)")
            #expect(reparsed.canonical == parsed.canonical)
            #expect(!reparsed.warnings.contains { $0.kind == .mixedOperators })
        }
    }

    @Test("Evaluation equals the brute-force truth table of an independent model")
    func evaluationMatchesTruthTable() async {
        await propertyCheck(count: 400, input: Gen.uint64()) { seed in
            var random = SplitMix(seed: seed)
            let model = ModelCondition.random(using: &random, depth: 5)
            let source = model.source(using: &random)
            let condition = try Condition(parsing: source, dialect: .extended)
            // Every subset of the universe, including the empty one and topics the condition does not name.
            for row in 0..<(1 << ModelCondition.universe.count) {
                let topics = Set(
                    ModelCondition.universe.indices.filter { row & (1 << $0) != 0 }.map { ModelCondition.universe[$0] })
                #expect(
                    condition.matches(subscribedTo: topics) == model.evaluate(topics),
                    "\(source) with \(topics.sorted())")
            }
        }
    }

    @Test("The lexer and parser never crash, and every error points inside the input")
    func neverCrashes() async {
        let alphabet: [String] = [
            "'", "\"", "(", ")", "&", "&&", "|", "||", "!", " ", "\n", "in", "topics", "a", "b",
            "in topics", "'a'", "and", "=", "é", "🙂", "\t", "%", "-", "\u{0}",
        ]
        await propertyCheck(count: 2000, input: Gen.uint64()) { seed in
            var random = SplitMix(seed: seed)
            let length = Int(random.next() % 40)
            let source = (0..<length).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }.joined()
            for dialect in Dialect.allCases {
                do {
                    let condition = try Condition(parsing: source, dialect: dialect)
                    _ = condition.canonical
                } catch let error as ConditionError {
                    let range = error.diagnostic.range
                    #expect(range.offset >= 0 && range.end <= source.utf8.count, "\(source)")
                    _ = error.diagnostic.rendered(in: source)
                } catch {
                    Issue.record("unexpected error \(error)")
                }
            }
        }
    }
}

@Suite("Hostile input")
struct HostileInputTests {
    @Test("60,000 nested parentheses end in a clean error")
    func deepNesting() throws {
        let source = String(repeating: "(", count: 60_000) + "'a' in topics" + String(repeating: ")", count: 60_000)
        for dialect in Dialect.allCases {
            let error = try #require(throws: ConditionError.self) { try Condition(parsing: source, dialect: dialect) }
            #expect([.nestingTooDeep, .inputTooLong].contains(error.diagnostic.kind))
        }
        let bangs = String(repeating: "!", count: 60_000) + "'a' in topics"
        let error = try #require(throws: ConditionError.self) { try Condition(parsing: bangs, dialect: .extended) }
        #expect(error.diagnostic.kind == .nestingTooDeep)
    }

    @Test("Megabytes of garbage are refused before parsing")
    func megabytesOfGarbage() throws {
        let source = String(repeating: "'a' in topics && ((", count: 200_000)
        let error = try #require(throws: ConditionError.self) { try Condition(parsing: source, dialect: .extended) }
        #expect(error.diagnostic.kind == .inputTooLong)
        #expect(error.diagnostic.rendered(in: source).count < 1000)
    }

    @Test("A long flat chain within the limits parses without deep recursion")
    func longFlatChain() throws {
        let source = (0..<3000).map { "'t\($0)' in topics" }.joined(separator: " || ")
        let condition = try Condition(parsing: source, dialect: .extended)
        #expect(condition.topicCount == 3000)
        #expect(condition.matches(subscribedTo: ["t2999"]))
    }
}

// MARK: - An independent model of conditions

/// A deterministic random source, so a failing seed reproduces.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func chance(_ percent: UInt64) -> Bool { next() % 100 < percent }
}

/// Binary trees with the textbook semantics, printed with random quotes, spacing and parentheses.
indirect enum ModelCondition {
    case topic(String)
    case not(ModelCondition)
    case and(ModelCondition, ModelCondition)
    case or(ModelCondition, ModelCondition)

    static let universe = ["a", "b", "c", "d", "e"]

    static func random(using random: inout SplitMix, depth: Int) -> ModelCondition {
        if depth == 0 || random.chance(30) {
            return .topic(universe[Int(random.next() % 4)])  // "e" is never named: it must not matter.
        }
        switch random.next() % 3 {
        case 0: return .not(Self.random(using: &random, depth: depth - 1))
        case 1:
            return .and(Self.random(using: &random, depth: depth - 1), Self.random(using: &random, depth: depth - 1))
        default:
            return .or(Self.random(using: &random, depth: depth - 1), Self.random(using: &random, depth: depth - 1))
        }
    }

    func evaluate(_ topics: Set<String>) -> Bool {
        switch self {
        case .topic(let name): topics.contains(name)
        case .not(let operand): !operand.evaluate(topics)
        case .and(let left, let right): left.evaluate(topics) && right.evaluate(topics)
        case .or(let left, let right): left.evaluate(topics) || right.evaluate(topics)
        }
    }

    /// Source text that means this tree under `!` > `&&` > `||`, with parentheses where precedence
    /// needs them and, at random, where it does not.
    func source(using random: inout SplitMix) -> String {
        let space = { (random: inout SplitMix) -> String in [" ", "", "  ", "\n", "\t"][Int(random.next() % 5)] }
        switch self {
        case .topic(let name):
            let quote = random.chance(50) ? "'" : "\""
            return quote + name + quote + " in" + (random.chance(20) ? "\n" : " ") + "topics"
        case .not(let operand):
            let inner = operand.source(using: &random)
            if case .topic = operand, random.chance(50) { return "!" + space(&random) + inner }
            if case .not = operand { return "!" + inner }
            return "!(" + inner + ")"
        case .and(let left, let right):
            return operand(left, of: "&&", using: &random) + space(&random) + "&&" + space(&random)
                + operand(right, of: "&&", using: &random)
        case .or(let left, let right):
            return operand(left, of: "||", using: &random) + space(&random) + "||" + space(&random)
                + operand(right, of: "||", using: &random)
        }
    }

    private func operand(_ child: ModelCondition, of op: String, using random: inout SplitMix) -> String {
        let text = child.source(using: &random)
        let needed: Bool
        switch child {
        case .or: needed = op == "&&"
        default: needed = false
        }
        return needed || random.chance(15) ? "(" + text + ")" : text
    }
}
