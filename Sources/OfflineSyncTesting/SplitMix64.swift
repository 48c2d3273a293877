/// A small seeded random number generator (SplitMix64): the same seed gives the same numbers on every platform and
/// run, for tests and fault harnesses whose choices must be replayed from a seed.
///
/// For example:
/// ```swift
/// var random = SplitMix64(seed: 42)
/// let fault = random.nextDouble() < 0.1      // the same choice every run
/// ```
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator at `seed`.
    ///
    /// - Parameter seed: Any value; each gives its own sequence.
    public init(seed: UInt64) { state = seed }

    /// The next number.
    ///
    /// - Returns: 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The next number as a fraction.
    ///
    /// - Returns: A value in 0..<1, with 53 random bits.
    public mutating func nextDouble() -> Double { Double(next() >> 11) / Double(1 << 53) }
}
