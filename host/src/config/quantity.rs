//! Memory sizes as Kubernetes writes them (`64Mi`, `1.5Gi`, `67108864`), for manifests and the
//! host's configuration alike.

/// Parses a Kubernetes memory quantity into bytes: plain bytes (`67108864`), binary suffixes
/// `Ki Mi Gi Ti Pi Ei` or decimal suffixes `k M G T P E`, with an optional fraction (`1.5Gi`,
/// rounded up to a whole byte).
///
/// # Errors
/// A message quoting the text and showing how to write a size.
pub fn quantity(text: &str) -> Result<u64, String> {
    let bad = || format!("`{text}` is not a memory size; write it like 64Mi, 1Gi or 67108864");
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let multiplier: u128 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        _ => return Err(bad()),
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
        return Err(bad());
    }
    let value = |s: &str| s.parse::<u128>().unwrap_or(0);
    let scale = 10_u128.pow(u32::try_from(fraction.len()).unwrap_or(0));
    let bytes = value(whole) * multiplier + (value(fraction) * multiplier).div_ceil(scale);
    u64::try_from(bytes).map_err(|_| format!("`{text}` is too large a memory size"))
}
