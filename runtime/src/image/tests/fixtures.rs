//! The real images in `runtime/kernels/`, picked up by extension: each passes its check and
//! the independent reader, and every single-field change of each keeps the promise (what
//! the check accepts, the reader reads in bounds). A new fixture needs no code here:
//! `*.cubin` and `*.fatbin` must pass, `*.compressed.fatbin` must be refused as compressed.

use std::path::Path;

use super::oracle;
use crate::image::{check_cubin, check_fatbin};

fn fixtures(suffix: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
    let mut found: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let name = path.file_name()?.to_str()?.to_owned();
            name.ends_with(suffix)
                .then(|| std::fs::read(&path).map(|bytes| (name, bytes)).ok())?
        })
        .collect();
    found.sort();
    found
}

/// Each field set to each of a few hostile values, one at a time.
fn single_field_changes(image: &[u8], fields: &[(u64, u8)]) -> impl Iterator<Item = Vec<u8>> {
    let len = image.len() as u64;
    let values = [
        0,
        1,
        0xFF00,
        0xFFFE,
        0xFFFF,
        len - 1,
        len,
        len + 1,
        u64::MAX,
    ];
    fields.iter().flat_map(move |&(at, width)| {
        values.into_iter().map(move |v| {
            let mut changed = image.to_vec();
            let (at, width) = (at as usize, usize::from(width));
            changed[at..at + width].copy_from_slice(&v.to_le_bytes()[..width]);
            changed
        })
    })
}

#[test]
fn cubin_fixtures_pass_and_every_single_field_change_keeps_the_promise() {
    let cubins = fixtures(".cubin");
    assert!(!cubins.is_empty());
    for (name, image) in cubins {
        check_cubin(&image).unwrap_or_else(|e| panic!("{name}: {e}"));
        oracle::read_cubin(&image).unwrap_or_else(|e| panic!("{name}: oracle: {e}"));
        let mut accepted = 0;
        for changed in single_field_changes(&image, &oracle::cubin_fields(&image)) {
            if check_cubin(&changed).is_ok() {
                accepted += 1;
                if let Err(e) = oracle::read_cubin(&changed) {
                    panic!("{name}: a change was accepted, but {e}");
                }
            }
        }
        assert!(
            accepted > 0,
            "{name}: every change was refused; nothing was exercised"
        );
    }
}

#[test]
fn fatbin_fixtures_pass_and_every_single_field_change_keeps_the_promise() {
    for (name, image) in fixtures(".fatbin") {
        if name.ends_with(".compressed.fatbin") {
            let e = check_fatbin(&image).expect_err(&name);
            assert!(e.reason.contains("compressed"), "{name}: {e}");
            continue;
        }
        check_fatbin(&image).unwrap_or_else(|e| panic!("{name}: {e}"));
        oracle::read_fatbin(&image).unwrap_or_else(|e| panic!("{name}: oracle: {e}"));
        for changed in single_field_changes(&image, &oracle::fatbin_fields(&image)) {
            if check_fatbin(&changed).is_ok()
                && let Err(e) = oracle::read_fatbin(&changed)
            {
                panic!("{name}: a change was accepted, but {e}");
            }
        }
    }
}
