import Conditions

/// A condition's expression evaluated as set algebra over bitmaps: topics are the sets `leaf`
/// gives, and `!` ranges over `universe` (the registered tokens, or one chunk of them).
///
/// Every topic's members are registered tokens, so every set computed is inside `universe`.
/// That lets `a && !b` be `a − b`, which costs what `a` and `b` hold, instead of building the
/// complement of `b` over every registered token first.
struct AudienceAlgebra {
    let universe: RoaringBitmap
    let leaf: (String) -> RoaringBitmap

    func evaluate(_ expression: Expression) -> RoaringBitmap {
        switch expression {
        case .topic(let name, _):
            return leaf(name)
        case .not(let operand, _):
            return universe.subtracting(evaluate(operand))
        case .and(let operands, _):
            var (result, excluded) = intersectionOfPositives(operands)
            for operand in excluded where !result.isEmpty { result.subtract(evaluate(operand)) }
            return result
        case .or(let operands, _):
            return union(operands[...])
        }
    }

    /// `evaluate(expression).count`, computing the last operation as a count only.
    func count(_ expression: Expression) -> Int {
        switch expression {
        case .topic(let name, _):
            return leaf(name).count
        case .not(let operand, _):
            return universe.count - count(operand)
        case .and(let operands, _):
            var (result, excluded) = intersectionOfPositives(operands)
            guard let last = excluded.popLast() else { return result.count }
            for operand in excluded where !result.isEmpty { result.subtract(evaluate(operand)) }
            return result.count - result.intersectionCount(evaluate(last))
        case .or(let operands, _):
            // |A ∪ B| = |A| + |B| − |A ∩ B|
            let head = union(operands.dropLast())
            let last = evaluate(operands[operands.count - 1])
            return head.count + last.count - head.intersectionCount(last)
        }
    }

    /// The intersection of the operands that are not negations (the universe when all are), and
    /// what the negated ones negate, to be subtracted from it.
    private func intersectionOfPositives(_ operands: [Expression]) -> (RoaringBitmap, [Expression]) {
        var included: [RoaringBitmap] = []
        var excluded: [Expression] = []
        for operand in operands {
            if case .not(let negated, _) = operand { excluded.append(negated) } else { included.append(evaluate(operand)) }
        }
        guard !included.isEmpty else { return (universe, excluded) }
        // Smallest first: every later intersection is bounded by it.
        included.sort { $0.count < $1.count }
        var result = included[0]
        for part in included.dropFirst() where !result.isEmpty { result.formIntersection(part) }
        return (result, excluded)
    }

    private func union(_ operands: ArraySlice<Expression>) -> RoaringBitmap {
        var result = evaluate(operands[operands.startIndex])
        for operand in operands.dropFirst() { result.formUnion(evaluate(operand)) }
        return result
    }
}
