//! "did you mean" hints for unknown names.

use syn::Ident;

/// "unknown stream `cmpute`; did you mean `compute`?", or the declared names when none is
/// close, or `fallback` when nothing of that kind is declared.
pub fn unknown(kind: &str, name: &Ident, candidates: &[String], fallback: &str) -> String {
    format!(
        "unknown {kind} `{name}`; {}",
        suggestion(name, candidates, fallback)
    )
}

/// The part of an "unknown name" message after the `;`: the closest candidate, else the
/// candidates, else `fallback`.
pub fn suggestion(name: &Ident, candidates: &[String], fallback: &str) -> String {
    let name = name.to_string();
    let closest = candidates
        .iter()
        .map(|candidate| (distance(&name, candidate), candidate))
        .filter(|&(distance, _)| distance <= (name.chars().count() / 3).max(1))
        .min_by_key(|&(distance, _)| distance);
    if let Some((_, candidate)) = closest {
        return format!("did you mean `{candidate}`?");
    }
    // A short list helps; a long one is noise.
    if !candidates.is_empty() && candidates.len() <= 6 {
        let list: Vec<String> = candidates.iter().map(|c| format!("`{c}`")).collect();
        return format!("expected one of {}", list.join(", "));
    }
    fallback.to_owned()
}

/// Levenshtein distance over chars.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitute.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ident(name: &str) -> Ident {
        Ident::new(name, proc_macro2::Span::call_site())
    }

    #[test]
    fn suggests_the_closest_name() {
        let names = ["compute".to_owned(), "copy".to_owned()];
        assert_eq!(
            unknown("stream", &ident("cmpute"), &names, "-"),
            "unknown stream `cmpute`; did you mean `compute`?"
        );
        assert_eq!(
            unknown("stream", &ident("io"), &names, "-"),
            "unknown stream `io`; expected one of `compute`, `copy`"
        );
        assert_eq!(
            unknown("stage", &ident("x"), &[], "declare it"),
            "unknown stage `x`; declare it"
        );
    }

    #[test]
    fn distance_is_levenshtein() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("same", "same"), 0);
    }
}
