//! Property tests: the checks never panic, and whatever they accept the independent reader
//! (`oracle`) walks without leaving bounds.

use proptest::prelude::*;

use super::build::{ElfBuilder, FatbinBuilder};
use super::oracle;
use crate::image::read::Bytes;
use crate::image::{check_cubin, check_fatbin, check_ptx, ptx};

const CUBIN: &[u8] = include_bytes!("../../../kernels/test_kernels.sm_90.cubin");

/// A change to one field: set it, or move it a little from its valid value.
#[derive(Clone, Debug)]
enum Change {
    Set(u64),
    Add(i64),
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        3 => prop_oneof![
            Just(0u64),
            Just(1),
            Just(2),
            Just(0xFF),
            Just(0xFF00),
            Just(0xFFF1),
            Just(0xFFFE),
            Just(0xFFFF),
            Just(u64::from(u32::MAX)),
            Just(u64::MAX),
            Just(u64::MAX - 7),
            0u64..0x4000,
            any::<u64>(),
        ]
        .prop_map(Change::Set),
        2 => prop_oneof![-16i64..=16, Just(-64), Just(64), Just(-1024), Just(1024)]
            .prop_map(Change::Add),
    ]
}

/// Applies `change` to the `width`-byte little-endian field at `at`.
fn apply(image: &mut [u8], (at, width): (u64, u8), change: &Change) {
    let (at, width) = (at as usize, usize::from(width));
    let Some(field) = image.get_mut(at..at + width) else {
        return;
    };
    let mut bytes = [0u8; 8];
    bytes[..width].copy_from_slice(field);
    let old = u64::from_le_bytes(bytes);
    let new = match change {
        Change::Set(v) => *v,
        Change::Add(d) => old.wrapping_add_signed(*d),
    };
    field.copy_from_slice(&new.to_le_bytes()[..width]);
}

/// Mutates `fields` of `image` by `changes` (each picks a field by index).
fn mutate(
    image: &[u8],
    fields: &[(u64, u8)],
    changes: &[(prop::sample::Index, Change)],
) -> Vec<u8> {
    let mut image = image.to_vec();
    for (field, change) in changes {
        apply(&mut image, fields[field.index(fields.len())], change);
    }
    image
}

/// Accepted images are read in bounds; refused ones name a place inside (or just past) the
/// image.
fn cubin_property(image: &[u8]) -> Result<(), TestCaseError> {
    match check_cubin(image) {
        Ok(_) => {
            if let Err(e) = oracle::read_cubin(image) {
                return Err(TestCaseError::fail(format!("accepted, but {e}")));
            }
        }
        Err(e) => prop_assert!(e.offset.is_none_or(|o| o <= image.len() as u64), "{e}"),
    }
    Ok(())
}

fn fatbin_property(image: &[u8]) -> Result<(), TestCaseError> {
    match check_fatbin(image) {
        Ok(_) => {
            if let Err(e) = oracle::read_fatbin(image) {
                return Err(TestCaseError::fail(format!("accepted, but {e}")));
            }
        }
        Err(e) => prop_assert!(e.offset.is_none_or(|o| o <= image.len() as u64), "{e}"),
    }
    Ok(())
}

fn changes() -> impl Strategy<Value = Vec<(prop::sample::Index, Change)>> {
    prop::collection::vec((any::<prop::sample::Index>(), change()), 1..4)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// (a) Arbitrary bytes: no check panics, and anything accepted is in bounds.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..1024)) {
        cubin_property(&bytes)?;
        fatbin_property(&bytes)?;
        let _ = check_ptx(&String::from_utf8_lossy(&bytes));
        let _ = ptx::check_payload(Bytes::new(&bytes));
    }

    /// Arbitrary bytes behind a valid ELF header, and behind a valid fatbin header, so the
    /// later rules see them too.
    #[test]
    fn arbitrary_bodies_never_panic(body in prop::collection::vec(any::<u8>(), 0..1024)) {
        let mut elf = ElfBuilder::minimal().build()[..64].to_vec();
        elf.extend_from_slice(&body);
        cubin_property(&elf)?;
        let mut fat = FatbinBuilder::cubin_and_ptx().build()[..16].to_vec();
        fat[8..16].copy_from_slice(&(body.len() as u64).to_le_bytes());
        fat.extend_from_slice(&body);
        fatbin_property(&fat)?;
    }

    /// (b) Valid cubins with one to three header fields changed.
    #[test]
    fn mutated_cubins_that_pass_are_in_bounds(changes in changes(), committed in any::<bool>()) {
        let image = if committed { CUBIN.to_vec() } else { ElfBuilder::minimal().build() };
        let fields = oracle::cubin_fields(&image);
        cubin_property(&mutate(&image, &fields, &changes))?;
    }

    /// (b) A valid fatbin with one to three fields changed, its cubin's included.
    #[test]
    fn mutated_fatbins_that_pass_are_in_bounds(changes in changes()) {
        let image = FatbinBuilder::cubin_and_ptx().build();
        let fields = oracle::fatbin_fields(&image);
        fatbin_property(&mutate(&image, &fields, &changes))?;
    }

    /// Random bytes overwritten anywhere, headers or not.
    #[test]
    fn overwritten_bytes_never_break_the_promise(
        writes in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut cubin = ElfBuilder::minimal().build();
        let mut fatbin = FatbinBuilder::cubin_and_ptx().build();
        for (at, byte) in &writes {
            let i = at.index(cubin.len());
            cubin[i] = *byte;
            let i = at.index(fatbin.len());
            fatbin[i] = *byte;
        }
        cubin_property(&cubin)?;
        fatbin_property(&fatbin)?;
    }

    /// Issue 21: with no program headers, any nonzero `e_phoff` (inside the image or not) is
    /// refused, whatever the entry size says; only 0 passes.
    #[test]
    fn an_empty_program_header_table_has_no_offset(
        phoff in prop_oneof![1u64..0x4000, any::<u64>()],
        phentsize in prop_oneof![Just(0u16), Just(56), any::<u16>()],
        committed in any::<bool>(),
    ) {
        let mut image = if committed { CUBIN.to_vec() } else { ElfBuilder::minimal().build() };
        image[0x36..0x38].copy_from_slice(&phentsize.to_le_bytes());
        image[0x38..0x3A].copy_from_slice(&0u16.to_le_bytes());
        image[0x20..0x28].copy_from_slice(&phoff.to_le_bytes());
        let e = check_cubin(&image).unwrap_err();
        prop_assert_eq!(e.field.as_str(), "`e_phoff`");
        cubin_property(&image)?;
    }

    /// Truncations: every prefix of a valid image is refused, never accepted or panicking.
    #[test]
    fn truncated_fatbins_are_refused(cut in any::<prop::sample::Index>()) {
        let image = FatbinBuilder::cubin_and_ptx().build();
        let len = cut.index(image.len());
        prop_assert!(check_fatbin(&image[..len]).is_err());
    }
}

/// The mutations do find refusals and acceptances of changed images both, so the property
/// above is exercised on both sides (a guard against a fuzzer that only ever sees refusals).
#[test]
fn field_mutations_reach_both_outcomes() {
    let image = ElfBuilder::minimal().build();
    let fields = oracle::cubin_fields(&image);
    let (mut accepted, mut refused) = (0, 0);
    for (i, &field) in fields.iter().enumerate() {
        for change in [Change::Set(0), Change::Add(1), Change::Set(u64::MAX)] {
            let mut changed = image.clone();
            apply(&mut changed, field, &change);
            if changed == image {
                continue;
            }
            match check_cubin(&changed) {
                Ok(_) => {
                    accepted += 1;
                    if let Err(e) = oracle::read_cubin(&changed) {
                        panic!("field {i} {field:?} {change:?}: accepted, but {e}");
                    }
                }
                Err(_) => refused += 1,
            }
        }
    }
    assert!(
        accepted > 20 && refused > 50,
        "{accepted} accepted, {refused} refused"
    );
}
