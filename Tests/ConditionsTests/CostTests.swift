@testable import Conditions
import Foundation
import Testing

/// Checking a hostile condition costs about as much as parsing it, and reporting on it stays small:
/// warnings are capped and counted, the truth table keeps to its budget, renderings and notes are
/// excerpts. These tests assert the bounds, never timings.
@Suite("Cost of checking")
struct CostTests {
    /// `atom || atom || …` as long as the length limit allows.
    private static func repeated(_ atom: String, separator: String = " || ") -> String {
        let count = (Dialect.extended.maximumLength + separator.utf8.count) / (atom.utf8.count + separator.utf8.count)
        return Array(repeating: atom, count: count).joined(separator: separator)
    }

    /// `'t0' in topics || 't0' in topics || 't1' in topics || 't1' in topics || …` up to the length limit.
    private static func pairs() -> (source: String, distinct: Int) {
        var atoms: [String] = []
        var length = 0
        var index = 0
        while true {
            let atom = "'t\(index)' in topics"
            let added = 2 * (atom.utf8.count + 4)
            if length + added > Dialect.extended.maximumLength { break }
            atoms += [atom, atom]
            length += added
            index += 1
        }
        return (atoms.joined(separator: " || "), index)
    }

    @Test("A topic repeated all through 64 KiB draws one warning that says how often")
    func oneWarningPerRepeatedTopic() throws {
        let source = Self.repeated("'a' in topics")
        #expect(source.utf8.count > 60_000)
        let condition = try Condition(parsing: source, dialect: .extended)
        #expect(condition.warnings.map(\.kind) == [.duplicateTopic])
        #expect(condition.omittedWarnings == 0)
        let warning = try #require(condition.warnings.first)
        #expect(warning.range == SourceRange(offset: 17, length: 13))
        #expect(warning.message.contains("named \(condition.topicCount) times (first at 1:1)"))
    }

    @Test("Past the cap, warnings are counted, not kept")
    func warningsAreCapped() throws {
        let (source, distinct) = Self.pairs()
        #expect(distinct > 2 * Condition.maximumWarnings)
        let condition = try Condition(parsing: source, dialect: .extended)
        #expect(condition.warnings.count == Condition.maximumWarnings)
        #expect(condition.warnings.allSatisfy { $0.kind == .duplicateTopic })
        #expect(condition.omittedWarnings == distinct - Condition.maximumWarnings)
        // The kept ones are the first in the source.
        #expect(condition.warnings.first?.message.contains("'t0'") == true)
        #expect(condition.warnings.last?.message.contains("'t\(Condition.maximumWarnings - 1)'") == true)

        let report = ConditionReport(checking: source, dialect: .extended)
        #expect(report.diagnostics.count == Condition.maximumWarnings)
        #expect(report.omittedWarnings == condition.omittedWarnings)
        let json = try #require(String(data: JSONEncoder().encode(report), encoding: .utf8))
        #expect(json.contains("\"omittedWarnings\":\(condition.omittedWarnings)"))
    }

    @Test("A constant result is reported even when other warnings fill the list")
    func constantResultIsNeverCrowdedOut() throws {
        let group = "('a' in topics && 'b' in topics || 'c' in topics)"
        let source =
            Array(repeating: group, count: 25).joined(separator: " && ") + " && !('c' in topics) && !('a' in topics)"
        let condition = try Condition(parsing: source, dialect: .extended)
        #expect(condition.warnings.count == Condition.maximumWarnings)
        #expect(condition.warnings.dropLast().allSatisfy { $0.kind == .mixedOperators })
        #expect(condition.warnings.last?.kind == .alwaysFalse)
        // 25 mixed levels and 3 repeated topics found, 19 + 1 kept.
        #expect(condition.omittedWarnings == 25 + 3 + 1 - Condition.maximumWarnings)
    }

    @Test("A report on any 64 KiB condition has findings of bounded size")
    func reportSizeIsBounded() throws {
        let longName = String(repeating: "n", count: TopicName.maximumLength)
        // Sixty nested levels, each mixing operators, inside a long run.
        var nested = "'a' in topics"
        for level in 0..<60 {
            nested = "(" + nested + " || 'b\(level)' in topics && 'c' in topics)"
        }
        nested += String(repeating: " || 'x' in topics", count: 3_000)
        let sources = [
            Self.repeated("'a' in topics"),
            Self.pairs().source,
            Self.repeated("('\(longName)' in topics)"),
            Self.repeated("'\(longName)' in topics || 'x' in topics && 'y' in topics", separator: " && "),
            nested,
        ]
        for source in sources {
            #expect(source.utf8.count <= Dialect.extended.maximumLength)
            let report = ConditionReport(checking: source, dialect: .extended)
            #expect(report.valid)
            #expect(report.diagnostics.count <= Condition.maximumWarnings)
            let findings = try JSONEncoder().encode(report.diagnostics)
            #expect(findings.count < 64 * 1024, "\(source.prefix(60))")
            for finding in report.diagnostics {
                for line in finding.rendered.split(separator: "\n") where !line.contains("= note:") {
                    #expect(line.count < 1_200)
                }
                for note in finding.notes {
                    #expect(note.count <= Parser.maximumReadingLength + 80)
                }
            }
        }
    }

    @Test("A mixed-operator note on a huge level shows an excerpt of each reading")
    func notesAreExcerpts() throws {
        let source =
            Array(repeating: "'a' in topics && 'b' in topics", count: 1_500).joined(separator: " || ")
            + " && 'c' in topics"
        let condition = try Condition(parsing: source, dialect: .extended)
        let warning = try #require(condition.warnings.first { $0.kind == .mixedOperators })
        #expect(warning.notes.count == 3)
        for note in warning.notes.prefix(2) {
            #expect(note.hasSuffix("…"))
            #expect(note.count <= Parser.maximumReadingLength + 80)
        }
        #expect(warning.notes[0].contains(": ('a' in topics && 'b' in topics) || ('a' in topics && 'b' in topics)"))
        #expect(warning.notes[1].hasPrefix("read left to right (as FCM documents): ((((("))
    }

    @Test("The truth table is skipped when rows times nodes exceed the budget")
    func truthTableKeepsToItsBudget() throws {
        // Always false (each group is always true, and the whole is negated), over 12 topics.
        var groups: [String] = []
        for index in 0..<600 {
            let topic = "'t\(index % 12)' in topics"
            groups.append("(!(\(topic)) || \(topic))")
        }
        let large = try Condition(parsing: "!(" + groups.joined(separator: " && ") + ")", dialect: .extended)
        #expect(large.topics.count == 12)
        #expect((1 << 12) * large.expression.nodeCount > Lint.truthTableBudget)
        #expect(Lint.constancy(of: large.expression) == .notChecked)
        #expect(!large.warnings.contains { $0.kind == .alwaysFalse })

        // The same law over 12 topics, small enough to check.
        let small = try Condition(
            parsing: "!(" + groups.prefix(12).joined(separator: " && ") + ")", dialect: .extended)
        #expect((1 << 12) * small.expression.nodeCount <= Lint.truthTableBudget)
        #expect(Lint.constancy(of: small.expression) == .alwaysFalse)
        #expect(small.warnings.contains { $0.kind == .alwaysFalse })

        // A huge condition over one topic is cheap to check, and is checked.
        let oneTopic = try Condition(
            parsing: Self.repeated("('a' in topics && !('a' in topics))"), dialect: .extended)
        #expect(oneTopic.expression.nodeCount > 5_000)
        #expect(Lint.constancy(of: oneTopic.expression) == .alwaysFalse)
        #expect(oneTopic.warnings.contains { $0.kind == .alwaysFalse })
    }

    @Test("A finding at column 60,000 renders as a short window with the caret under it")
    func renderingFarAlongALineIsBounded() throws {
        let source = String(repeating: "'a' in topics || ", count: 3_600) + "'b' in topics"
        let offset = source.utf8.count - 13
        #expect(offset > 60_000)
        let diagnostic = Diagnostic(.warning, .duplicateTopic, "here", at: SourceRange(offset: offset, length: 13))
        let text = diagnostic.rendered(in: source)
        #expect(text.count < 400)
        #expect(text.contains("--> condition:1:\(offset + 1)\n"))
        let lines = text.split(separator: "\n")
        let sourceLine = try #require(lines.first { $0.hasPrefix("1 | …") })
        let caretLine = try #require(lines.first { $0.contains("^") })
        let caretAt = try #require(caretLine.firstIndex(of: "^"))
        let column = caretLine.distance(from: caretLine.startIndex, to: caretAt)
        #expect(sourceLine.dropFirst(column).hasPrefix("'b' in topics"))
        #expect(caretLine.hasSuffix("^" + String(repeating: "~", count: 12)))

        let finding = ConditionReport.Finding(diagnostic, in: source)
        #expect(finding.line == 1)
        #expect(finding.column == offset + 1)
        #expect(finding.rendered == text)
    }

    @Test("Locating many offsets in one pass agrees with locating each")
    func batchLocationAgrees() {
        let source = "'a' in topics &&\r\n\t('é' in topics ||\n  'b' in topics)\n"
        let offsets = Array((0...source.utf8.count + 2).reversed())
        let together = SourceLocation.locate(offsets, in: source).map(\.lineColumn)
        let oneByOne = offsets.map { LineColumn(offset: $0, in: source) }
        #expect(together == oneByOne)
        #expect(LineColumn(offset: 24, in: source) == LineColumn(line: 2, column: 6))
        #expect(LineColumn(offset: 40, in: source) == LineColumn(line: 3, column: 3))
    }
}
