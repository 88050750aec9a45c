//! The race detector against a brute-force oracle on random multi-stream programs.
//!
//! The oracle builds the happens-before DAG of the program explicitly (stream order, host
//! order into every later enqueue, record -> wait edges, stream and event synchronizes),
//! takes its transitive closure, and calls racy every conflicting pair of accesses that the
//! closure leaves unordered. The detector must report exactly those pairs.

use std::collections::BTreeSet;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use super::{bounded, context, stream};
use crate::cpu::{Access, BufferId, EventOptions, Hazard, Op};

const MAX_STREAMS: usize = 4;
const BUFFERS: usize = 3;
const EVENTS: usize = 3;

/// One step of a random program; stream indices are taken modulo the program's stream count.
#[derive(Clone, Debug)]
enum Step {
    Op {
        stream: usize,
        accesses: Vec<(usize, bool)>,
    },
    Record {
        stream: usize,
        event: usize,
    },
    Wait {
        stream: usize,
        event: usize,
    },
    SyncStream {
        stream: usize,
    },
    SyncEvent {
        event: usize,
    },
    Host {
        accesses: Vec<(usize, bool)>,
    },
}

fn accesses() -> impl Strategy<Value = Vec<(usize, bool)>> {
    prop::collection::vec((0..BUFFERS, any::<bool>()), 1..=3)
}

fn step() -> impl Strategy<Value = Step> {
    let stream = 0..MAX_STREAMS;
    let event = 0..EVENTS;
    prop_oneof![
        6 => (stream.clone(), accesses()).prop_map(|(stream, accesses)| Step::Op { stream, accesses }),
        3 => (stream.clone(), event.clone()).prop_map(|(stream, event)| Step::Record { stream, event }),
        3 => (stream.clone(), event.clone()).prop_map(|(stream, event)| Step::Wait { stream, event }),
        1 => stream.prop_map(|stream| Step::SyncStream { stream }),
        1 => event.prop_map(|event| Step::SyncEvent { event }),
        1 => accesses().prop_map(|accesses| Step::Host { accesses }),
    ]
}

fn program() -> impl Strategy<Value = (usize, Vec<Step>)> {
    (1..=MAX_STREAMS, prop::collection::vec(step(), 1..28))
}

/// A reported or predicted race: (earlier op, later op, buffer, hazard).
type Pair = (String, String, String, Hazard);

/// One access per buffer, a write winning (as the detector merges an op's accesses).
fn merged(accesses: &[(usize, bool)]) -> Vec<(usize, Access)> {
    let mut out: Vec<(usize, Access)> = Vec::new();
    for &(buffer, write) in accesses {
        let access = if write { Access::Write } else { Access::Read };
        match out.iter_mut().find(|(b, _)| *b == buffer) {
            Some(entry) => entry.1 = entry.1.max(access),
            None => out.push((buffer, access)),
        }
    }
    out
}

fn label(index: usize, step: &Step) -> String {
    match step {
        Step::Host { .. } => format!("host{index}"),
        _ => format!("op{index}"),
    }
}

/// The oracle: racy pairs from the explicit happens-before DAG.
fn oracle(streams: usize, steps: &[Step]) -> BTreeSet<Pair> {
    let n = steps.len();
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut last_on_stream: Vec<Option<usize>> = vec![None; streams];
    let mut last_record: Vec<Option<usize>> = vec![None; EVENTS];
    let mut last_host: Option<usize> = None;
    for (i, step) in steps.iter().enumerate() {
        let on_stream = |s: usize, preds: &mut Vec<usize>, last: &mut Vec<Option<usize>>| {
            preds.extend(last[s % streams]);
            last[s % streams] = Some(i);
        };
        match step {
            Step::Op { stream, .. } => on_stream(*stream, &mut preds[i], &mut last_on_stream),
            Step::Record { stream, event } => {
                on_stream(*stream, &mut preds[i], &mut last_on_stream);
                last_record[*event] = Some(i);
            }
            Step::Wait { stream, event } => {
                on_stream(*stream, &mut preds[i], &mut last_on_stream);
                preds[i].extend(last_record[*event]);
            }
            Step::SyncStream { stream } => preds[i].extend(last_on_stream[stream % streams]),
            Step::SyncEvent { event } => preds[i].extend(last_record[*event]),
            Step::Host { .. } => {}
        }
        // The host program order: everything is issued after the host's previous action.
        preds[i].extend(last_host);
        if matches!(
            step,
            Step::SyncStream { .. } | Step::SyncEvent { .. } | Step::Host { .. }
        ) {
            last_host = Some(i);
        }
    }
    // Transitive closure in program order (every edge points backwards).
    let mut ancestors: Vec<BTreeSet<usize>> = Vec::with_capacity(n);
    for pred in &preds {
        let mut set = BTreeSet::new();
        for &p in pred {
            set.insert(p);
            set.extend(ancestors[p].iter().copied());
        }
        ancestors.push(set);
    }
    let access_lists: Vec<Option<Vec<(usize, Access)>>> = steps
        .iter()
        .map(|step| match step {
            Step::Op { accesses, .. } | Step::Host { accesses } => Some(merged(accesses)),
            _ => None,
        })
        .collect();
    let mut racy = BTreeSet::new();
    for later in 0..n {
        let Some(later_accesses) = &access_lists[later] else {
            continue;
        };
        for earlier in 0..later {
            let Some(earlier_accesses) = &access_lists[earlier] else {
                continue;
            };
            if ancestors[later].contains(&earlier) {
                continue;
            }
            for &(buffer, first) in earlier_accesses {
                for &(other, second) in later_accesses {
                    if let (true, Some(hazard)) = (buffer == other, Hazard::between(first, second))
                    {
                        racy.insert((
                            label(earlier, &steps[earlier]),
                            label(later, &steps[later]),
                            format!("b{buffer}"),
                            hazard,
                        ));
                    }
                }
            }
        }
    }
    racy
}

/// Runs the program on a checked context and returns what the detector reported.
fn detect(streams: usize, steps: &[Step]) -> BTreeSet<Pair> {
    let ctx = context(true);
    let names = ["s0", "s1", "s2", "s3"];
    let streams: Vec<_> = names[..streams]
        .iter()
        .map(|name| stream(&ctx, name))
        .collect();
    let events: Vec<_> = (0..EVENTS)
        .map(|_| ctx.create_event(EventOptions::default()))
        .collect();
    let buffers: Vec<BufferId> = (0..BUFFERS)
        .map(|b| ctx.register_buffer(format!("b{b}")))
        .collect();
    let on = |s: usize| &streams[s % streams.len()];
    for (i, step) in steps.iter().enumerate() {
        let label = label(i, step);
        // Misuse is impossible here and races are read from the context, so results are ignored.
        match step {
            Step::Op { stream, accesses } => {
                let mut op = Op::replayable(label, || Ok(()));
                for &(buffer, write) in accesses {
                    let access = if write { Access::Write } else { Access::Read };
                    op = op.access(buffers[buffer], access);
                }
                on(*stream).enqueue(op).expect("enqueue");
            }
            Step::Record { stream, event } => on(*stream).record(&events[*event]).expect("record"),
            Step::Wait { stream, event } => on(*stream).wait(&events[*event]).expect("wait"),
            Step::SyncStream { stream } => {
                let _ = on(*stream).synchronize();
            }
            Step::SyncEvent { event } => events[*event].synchronize().expect("event sync"),
            Step::Host { accesses } => {
                let list: Vec<(BufferId, Access)> = merged(accesses)
                    .into_iter()
                    .map(|(b, a)| (buffers[b], a))
                    .collect();
                let _ = ctx.host_access(label, &list);
            }
        }
    }
    ctx.races()
        .into_iter()
        .map(|r| {
            (
                r.earlier.op.to_string(),
                r.later.op.to_string(),
                r.buffer_name.to_string(),
                r.hazard,
            )
        })
        .collect()
}

#[test]
fn detector_matches_the_happens_before_oracle() {
    bounded(|| {
        let config = Config {
            cases: 64,
            failure_persistence: None,
            ..Config::default()
        };
        let mut runner = TestRunner::new(config);
        runner
            .run(&program(), |(streams, steps)| {
                let expected = oracle(streams, &steps);
                let found = detect(streams, &steps);
                prop_assert_eq!(found, expected);
                Ok(())
            })
            .unwrap();
    });
}

#[test]
fn oracle_sanity_on_a_known_program() {
    // s0 writes b0; s1 reads it without an event (racy); after an event, s1 reads again (not).
    let steps = vec![
        Step::Op {
            stream: 0,
            accesses: vec![(0, true)],
        },
        Step::Op {
            stream: 1,
            accesses: vec![(0, false)],
        },
        Step::Record {
            stream: 0,
            event: 0,
        },
        Step::Wait {
            stream: 1,
            event: 0,
        },
        Step::Op {
            stream: 1,
            accesses: vec![(0, false)],
        },
    ];
    let expected: BTreeSet<Pair> = [(
        "op0".into(),
        "op1".into(),
        "b0".into(),
        Hazard::ReadAfterWrite,
    )]
    .into();
    assert_eq!(oracle(2, &steps), expected);
    bounded(move || assert_eq!(detect(2, &steps), expected));
}
