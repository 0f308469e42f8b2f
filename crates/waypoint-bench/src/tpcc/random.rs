//! TPC-C's random inputs (spec §2.1.6, §4.3.2): NURand with its constants
//! C, customer last names from syllables, and the a-/n-strings of the
//! initial population.

use rand::Rng;
use serde::Serialize;

/// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x.
pub fn nurand<R: Rng>(rng: &mut R, a: u32, c: u32, x: u32, y: u32) -> u32 {
    debug_assert!(x <= y);
    (((rng.gen_range(0..=a) | rng.gen_range(x..=y)) + c) % (y - x + 1)) + x
}

/// The constants C of NURand (spec §2.1.6): one per field, chosen once.
/// C_LAST of the run differs from the load's by a delta in 65..=119 other
/// than 96 and 112 (§2.1.6.1); the C of C_ID and OL_I_ID are not used by
/// the load and are drawn freely.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NuConstants {
    /// C of NURand(255, 0, 999) for C_LAST.
    pub c_last: u32,
    /// C of NURand(1023, 1, 3000) for C_ID.
    pub c_id: u32,
    /// C of NURand(8191, 1, 100000) for OL_I_ID.
    pub ol_i_id: u32,
}

impl NuConstants {
    /// The load's constants.
    pub fn load<R: Rng>(rng: &mut R) -> Self {
        NuConstants {
            c_last: rng.gen_range(0..=255),
            c_id: rng.gen_range(0..=1023),
            ol_i_id: rng.gen_range(0..=8191),
        }
    }

    /// A run's constants for a database loaded with `load`.
    pub fn run<R: Rng>(rng: &mut R, load: &NuConstants) -> Self {
        let c_last = loop {
            let c: u32 = rng.gen_range(0..=255);
            if valid_c_last_delta(c, load.c_last) {
                break c;
            }
        };
        NuConstants {
            c_last,
            c_id: rng.gen_range(0..=1023),
            ol_i_id: rng.gen_range(0..=8191),
        }
    }
}

/// §2.1.6.1: |C_RUN - C_LOAD| in 65..=119 and neither 96 nor 112.
pub fn valid_c_last_delta(run: u32, load: u32) -> bool {
    let delta = run.abs_diff(load);
    (65..=119).contains(&delta) && delta != 96 && delta != 112
}

const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

/// The last name of number `n` in 0..=999: its three digits' syllables.
pub fn last_name(n: u32) -> Vec<u8> {
    debug_assert!(n <= 999);
    let mut s = Vec::with_capacity(15);
    for digit in [n / 100, (n / 10) % 10, n % 10] {
        s.extend_from_slice(SYLLABLES[digit as usize].as_bytes());
    }
    s
}

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// A random a-string of `min..=max` alphanumeric characters.
pub fn astring<R: Rng>(rng: &mut R, min: usize, max: usize) -> Vec<u8> {
    let len = rng.gen_range(min..=max);
    (0..len)
        .map(|_| ALNUM[rng.gen_range(0..ALNUM.len())])
        .collect()
}

/// A random n-string of `min..=max` digits.
pub fn nstring<R: Rng>(rng: &mut R, min: usize, max: usize) -> Vec<u8> {
    let len = rng.gen_range(min..=max);
    (0..len).map(|_| b'0' + rng.gen_range(0..10u8)).collect()
}

/// I_DATA / S_DATA: an a-string of 26..=50 characters, 10% of them with
/// "ORIGINAL" at a random position (§4.3.3.1).
pub fn data_with_original<R: Rng>(rng: &mut R) -> Vec<u8> {
    let mut s = astring(rng, 26, 50);
    if rng.gen_bool(0.1) {
        let at = rng.gen_range(0..=s.len() - 8);
        s[at..at + 8].copy_from_slice(b"ORIGINAL");
    }
    s
}

/// A zip code: a random n-string of 4 digits followed by "11111".
pub fn zip<R: Rng>(rng: &mut R) -> Vec<u8> {
    let mut z = nstring(rng, 4, 4);
    z.extend_from_slice(b"11111");
    z
}

/// SplitMix64: a stateless hash giving each loaded row its own seed, so
/// the initial population does not depend on the order it is loaded in.
pub fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn nurand_stays_in_range_and_is_skewed() {
        let mut rng = SmallRng::seed_from_u64(1);
        for (a, x, y) in [
            (255, 0, 999),
            (1023, 1, 3000),
            (8191, 1, 100_000),
            (1023, 1, 30),
        ] {
            for c in [0, 1, a / 2, a] {
                let mut hits = vec![0u32; (y + 1) as usize];
                for _ in 0..20_000 {
                    let v = nurand(&mut rng, a, c, x, y);
                    assert!((x..=y).contains(&v), "NURand({a}, {x}, {y}) C={c} gave {v}");
                    hits[v as usize] += 1;
                }
                // Non-uniform: the most frequent value is well above the
                // uniform share (checked where the range is large).
                let max = *hits.iter().max().unwrap() as f64;
                let uniform = 20_000.0 / (y - x + 1) as f64;
                if y - x >= 999 {
                    assert!(max > 1.5 * uniform, "NURand({a}, {x}, {y}) looks uniform");
                }
            }
        }
    }

    #[test]
    fn run_constants_keep_the_c_last_delta() {
        let mut rng = SmallRng::seed_from_u64(7);
        for _ in 0..1000 {
            let load = NuConstants::load(&mut rng);
            let run = NuConstants::run(&mut rng, &load);
            let d = run.c_last.abs_diff(load.c_last);
            assert!((65..=119).contains(&d) && d != 96 && d != 112, "delta {d}");
            assert!(run.c_last <= 255 && run.c_id <= 1023 && run.ol_i_id <= 8191);
        }
    }

    #[test]
    fn last_names_follow_the_syllables() {
        assert_eq!(last_name(0), b"BARBARBAR");
        assert_eq!(last_name(371), b"PRICALLYOUGHT");
        assert_eq!(last_name(999), b"EINGEINGEING");
        assert!((0..1000).all(|n| last_name(n).len() <= 15));
    }

    #[test]
    fn strings_have_their_lengths_and_alphabets() {
        let mut rng = SmallRng::seed_from_u64(3);
        let mut original = 0;
        for _ in 0..2000 {
            let a = astring(&mut rng, 8, 16);
            assert!((8..=16).contains(&a.len()) && a.iter().all(u8::is_ascii_alphanumeric));
            let n = nstring(&mut rng, 16, 16);
            assert!(n.len() == 16 && n.iter().all(u8::is_ascii_digit));
            let d = data_with_original(&mut rng);
            assert!((26..=50).contains(&d.len()));
            original += d.windows(8).any(|w| w == b"ORIGINAL") as u32;
            assert_eq!(&zip(&mut rng)[4..], b"11111");
        }
        assert!(
            (100..300).contains(&original),
            "{original} of 2000 ORIGINAL"
        );
    }
}
