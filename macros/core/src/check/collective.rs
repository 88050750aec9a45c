//! Rules on communication statements (`send`, `recv`, `all_reduce`, `broadcast`,
//! `all_gather`, `reduce_scatter`): they go through the pipeline's one communicator, move
//! device buffers, write only what the pipeline may write, reduce with an operator the
//! element type has, and compute their ranges, peers and roots on the host from scalars.
//!
//! Every rank runs the same expansion, so every rank enqueues (and captures) the same
//! operations in the same order: what NCCL requires of collectives and of graphs that
//! contain them. What the macro cannot see is which rank a `PEER` expression names on each
//! rank; a send must meet a receive of the same length on the peer, which the runtime
//! reports as a mismatch (CPU backend) or NCCL as a hang. What it can see is which groups
//! every rank runs: in a step that exchanges, a group with sends and no receive (or the other
//! way round, or more of one than the other) that every rank runs can never be matched, and
//! is refused ([`groups_pair`]).

use quote::ToTokens;
use syn::{Expr, Ident};

use super::accesses::buffers;
use super::hint::suggestion;
use super::statements::{distinct_primitives, resolve, what, writable};
use crate::ast::{self, Comm, CommOp, Statement, Use, mentions, type_string, ungroup_expr};
use crate::ctxt::Ctxt;
use crate::scope::{BufferDecl, Memory, Scope};
use crate::symbol::REDUCE_OPS;

/// Every rule on communication: one communicator, and each statement's operands and
/// host expressions. Whether the groups pair ([`groups_pair`]) is judged after every other
/// rule passed, so that a statement with its own mistake gives one error.
pub fn check(cx: &Ctxt, scope: &Scope<'_>) {
    communicator(cx, scope);
    for stage in &scope.stages {
        for statement in &stage.statements {
            if let Statement::Comm(comm) = statement {
                self::statement(cx, scope, comm);
                expressions(cx, scope, comm);
                scratch_written_over_the_communicator(cx, scope, comm);
                root_is_one_rank(cx, comm);
                both_sides_one_length(cx, scope, comm);
            }
        }
        for group in stage.statements.split(|s| !matches!(s, Statement::Comm(_))) {
            self_sends_pair(cx, group);
            if group.len() > 1 {
                group_apart(cx, group);
                sends_fit_receives(cx, scope, group);
            }
        }
    }
}

/// One communication group: a run of consecutive communication statements of a stage, the
/// first `send` and `recv` it holds, and how many of each.
struct Group<'a> {
    stage: usize,
    /// Its statements' indices in the stage.
    at: std::ops::Range<usize>,
    send: Option<&'a Comm>,
    recv: Option<&'a Comm>,
    sends: usize,
    recvs: usize,
}

impl Group<'_> {
    /// Whether it holds a `send` (or, for `false`, a `recv`).
    fn holds(&self, send: bool) -> bool {
        if send {
            self.send.is_some()
        } else {
            self.recv.is_some()
        }
    }
}

/// The communication groups of stage `id`, in order.
fn groups_of<'a>(scope: &Scope<'a>, id: usize) -> Vec<Group<'a>> {
    let statements = &scope.stages[id].statements;
    let mut groups: Vec<Group<'a>> = Vec::new();
    for (k, statement) in statements.iter().enumerate() {
        let Statement::Comm(comm) = statement else {
            continue;
        };
        let group = match groups.last_mut() {
            Some(last) if last.at.end == k => last,
            _ => {
                groups.push(Group {
                    stage: id,
                    at: k..k,
                    send: None,
                    recv: None,
                    sends: 0,
                    recvs: 0,
                });
                groups.last_mut().expect("just pushed")
            }
        };
        group.at.end = k + 1;
        match comm.op {
            CommOp::Send { .. } => {
                group.send.get_or_insert(&**comm);
                group.sends += 1;
            }
            CommOp::Recv { .. } => {
                group.recv.get_or_insert(&**comm);
                group.recvs += 1;
            }
            _ => {}
        }
    }
    groups
}

/// How often every rank runs stage `id` in a step, where that is the same on every rank: once
/// outside a `for`, the count of a `for` with constant bounds; `None` for a `for` over params,
/// whose count may differ from rank to rank (`for i in 0..n_peers`).
fn runs_alike(scope: &Scope<'_>, id: usize) -> Option<i128> {
    let Some(looped) = scope.stage_loops[id] else {
        return Some(1);
    };
    let body = scope.loops[looped];
    let start = crate::constant::value(&body.start)?;
    let end = crate::constant::value(&body.end)?;
    Some((end - start).max(0))
}

/// Rule: a group's sends are received by the peers' receives of that same group. Every rank
/// runs the same expansion, and communication stages are ordered in program order, so while
/// a rank is in a group every peer is in it too (or still before it): a group with a `send`
/// and no `recv` waits for receives no rank has posted, and one with a `recv` and no `send`
/// for sends no rank makes; and a group with both must hold as many of each, since every
/// rank's sends in it are received by the peers' receives in it. Judged only in a kind of step
/// that both sends and receives (an exchange every rank runs): one that only sends, or only
/// receives, may be one role of several pipelines that ranks run (a producer and a consumer
/// on one communicator), left to run time (the CPU backend's deadline, NCCL's hang) as is
/// what ranks may run differently: a kind of step with communication in a `for` over params
/// (its count may differ from rank to rank), and a half that another kind of step holds
/// (ranks may run different kinds).
pub fn groups_pair(cx: &Ctxt, scope: &Scope<'_>) {
    let stages_of =
        |kind: usize| (0..scope.stages.len()).filter(move |&id| scope.stage_kinds[id] == kind);
    let kind_holds = |kind: usize, send: bool| {
        stages_of(kind).any(|id| groups_of(scope, id).iter().any(|g| g.holds(send)))
    };
    for kind in 0..scope.kinds.len() {
        let counts: Vec<(usize, Option<i128>)> = stages_of(kind)
            .filter(|&id| !groups_of(scope, id).is_empty())
            .map(|id| (id, runs_alike(scope, id)))
            .collect();
        if counts.iter().any(|(_, count)| count.is_none()) {
            continue;
        }
        let groups: Vec<Group<'_>> = counts
            .iter()
            .filter(|(_, count)| *count != Some(0))
            .flat_map(|&(id, _)| groups_of(scope, id))
            .collect();
        let exchanges =
            groups.iter().any(|g| g.holds(true)) && groups.iter().any(|g| g.holds(false));
        if !exchanges {
            continue;
        }
        let elsewhere = |send: bool| {
            (0..scope.kinds.len()).any(|other| other != kind && kind_holds(other, send))
        };
        // A group whose other half an error already named (a `send` in one stage, its `recv`
        // in another: one mistake, reported once, on the first).
        let mut explained = vec![false; groups.len()];
        for (index, group) in groups.iter().enumerate() {
            if explained[index] {
                continue;
            }
            match (group.send, group.recv) {
                (Some(send), None) if !elsewhere(false) => {
                    if let Some(other) = lone_in_group(cx, scope, &groups, group, send, true) {
                        explained[other] = true;
                    }
                }
                (None, Some(recv)) if !elsewhere(true) => {
                    if let Some(other) = lone_in_group(cx, scope, &groups, group, recv, false) {
                        explained[other] = true;
                    }
                }
                (Some(send), Some(recv)) if group.sends != group.recvs => {
                    let more_sends = group.sends > group.recvs;
                    // Extra sends need receives elsewhere, extra receives sends.
                    if !elsewhere(!more_sends) {
                        uneven_group(cx, group, if more_sends { send } else { recv }, more_sends);
                    }
                }
                _ => {}
            }
        }
    }
}

/// The error for `lone`, a `send` (or `recv`) whose group has no `recv` (or `send`): on the
/// statement, saying where the other half is and how to bring it into the group. Returns the
/// index of that other half's group, when the error names one.
fn lone_in_group(
    cx: &Ctxt,
    scope: &Scope<'_>,
    groups: &[Group<'_>],
    group: &Group<'_>,
    lone: &Comm,
    send: bool,
) -> Option<usize> {
    let (word, other, example) = if send {
        ("send", "recv", "`send x to up; recv y from down;`")
    } else {
        ("recv", "send", "`recv y from down; send x to up;`")
    };
    let stage = scope.stages[group.stage];
    let same_stage = groups
        .iter()
        .position(|g| g.stage == group.stage && g.holds(!send));
    let far_stage = groups.iter().position(|g| g.holds(!send));
    let fix = if let Some(near) = same_stage.map(|i| &groups[i]) {
        let between = if near.at.start < group.at.start {
            near.at.end..group.at.start
        } else {
            group.at.end..near.at.start
        };
        let mut words: Vec<&str> = stage.statements[between]
            .iter()
            .map(statement_word)
            .collect();
        words.dedup();
        let words = words.join("`, `");
        format!(
            "the `{words}` between it and the `{other}` of stage `{}` splits them into two groups: move the `{words}` before or after both, so that they are next to each other",
            stage.name
        )
    } else if let Some(far) = far_stage.map(|i| &groups[i]) {
        format!(
            "move the `{other}` of stage `{}` into stage `{}`, next to this `{word}` (one group, such as {example})",
            scope.stages[far.stage].name, stage.name
        )
    } else {
        format!(
            "add the matching `{other}` next to it in stage `{}` (one group, such as {example})",
            stage.name
        )
    };
    let mut tokens = Ident::new(word, lone.keyword).to_token_stream();
    if let CommOp::Send { peer, .. } | CommOp::Recv { peer, .. } = &lone.op {
        peer.to_tokens(&mut tokens);
    }
    cx.error_spanned_by(
        tokens,
        format!(
            "this `{word}` has no `{other}` in its group (the communication statements next to it in its stage): every rank runs the same groups in the same order, so its peer is in this group too, with no `{other}` to pair with it, and both wait for ever; {fix}"
        ),
    );
    same_stage.or(far_stage)
}

/// The error for a group whose sends and receives differ in number, on its first statement of
/// the more numerous kind.
fn uneven_group(cx: &Ctxt, group: &Group<'_>, first: &Comm, more_sends: bool) {
    let (word, other, extra, missing) = if more_sends {
        ("send", "recv", group.sends, group.recvs)
    } else {
        ("recv", "send", group.recvs, group.sends)
    };
    let mut tokens = Ident::new(word, first.keyword).to_token_stream();
    if let CommOp::Send { peer, .. } | CommOp::Recv { peer, .. } = &first.op {
        peer.to_tokens(&mut tokens);
    }
    cx.error_spanned_by(
        tokens,
        format!(
            "this group has {extra} `{word}`s and {missing} `{other}`{}: every rank runs the same groups, so the sends of this group are received by the same group's receives on the peers, and as many of each are needed; add the missing `{other}` (a halo exchange receives from each neighbour it sends to), or drop a `{word}`",
            if missing == 1 { "" } else { "s" }
        ),
    );
}

/// The keyword of a statement, for messages.
fn statement_word(statement: &Statement) -> &'static str {
    match statement {
        Statement::Launch(_) => "launch",
        Statement::Copy(_) => "copy",
        Statement::Fill(_) => "fill",
        Statement::Wait(_) => "wait",
        Statement::Write(_) => "write",
        Statement::Host(_) => "host",
        Statement::Call(_) => "call",
        Statement::Control(control) => control.word(),
        Statement::Comm(comm) => comm.word(),
        Statement::NotCapturable(_) => "statement",
    }
}

/// The elements a constant range operand covers (`x[2..6]`, `x[..4]`, `x[2..=5]`); `None` when a
/// bound is not a constant or the end is left out.
fn constant_elements(operand: &ast::Operand) -> Option<(i128, i128)> {
    let Expr::Range(range) = ungroup_expr(operand.range.as_ref()?) else {
        return None;
    };
    let start = match &range.start {
        Some(start) => crate::constant::value(start)?,
        None => 0,
    };
    let end = crate::constant::value(range.end.as_ref()?)?;
    let end = match range.limits {
        syn::RangeLimits::HalfOpen(_) => end,
        syn::RangeLimits::Closed(_) => end.checked_add(1)?,
    };
    Some((start, end))
}

/// Rule: the statements of one communication group (consecutive ones, one `ncclGroupStart` ...
/// `ncclGroupEnd`) run together in any order, so none writes elements another of them uses;
/// with constant ranges, or ranges whose bounds differ by constants (`a[nx..nx + 4]` and
/// `a[nx + 2..nx + 6]`), this is decided when the program compiles (issue 23, class 2), and
/// otherwise before the step is enqueued.
fn group_apart(cx: &Ctxt, group: &[Statement]) {
    let operands: Vec<(&Comm, &ast::Operand, bool)> = group
        .iter()
        .filter_map(|s| match s {
            Statement::Comm(comm) => Some(&**comm),
            _ => None,
        })
        .flat_map(|comm| {
            comm.operands()
                .into_iter()
                .map(move |(operand, writes)| (comm, operand, writes))
        })
        .collect();
    for (j, (comm_b, b, writes_b)) in operands.iter().enumerate() {
        for (comm_a, a, writes_a) in &operands[..j] {
            if std::ptr::eq(*comm_a, *comm_b) || a.name != b.name || !(*writes_a || *writes_b) {
                continue;
            }
            let (start, end) = match (constant_elements(a), constant_elements(b)) {
                (Some(ra), Some(rb)) if ra.0.max(rb.0) < ra.1.min(rb.1) => {
                    (ra.0.max(rb.0).to_string(), ra.1.min(rb.1).to_string())
                }
                (Some(_), Some(_)) => continue,
                // Bounds that differ by constants (`a[nx..nx + 4]`, `a[nx + 2..nx + 6]`).
                _ => match super::comm_lengths::shared(a, b) {
                    Some(shared) => shared,
                    None => continue,
                },
            };
            let (writer, other) = if *writes_b {
                (comm_b, comm_a)
            } else {
                (comm_a, comm_b)
            };
            cx.error_spanned_by(
                &b.name,
                format!(
                    "`{}` of this group writes elements {start}..{end} of `{}` that its `{}` also uses: a group's statements run together, in any order; name elements that do not overlap, or move one statement to a stage of its own",
                    writer.word(),
                    b.name,
                    other.word()
                ),
            );
        }
    }
}

/// The number of elements an operand names, when the compiler can tell: a constant range
/// (`x[2..6]`, `x[..4]`, `x[2..=5]`), or a whole scratch buffer of constant length (or a
/// range of one open at its end).
pub(super) fn operand_length(scope: &Scope<'_>, operand: &ast::Operand) -> Option<i128> {
    let scratch_length = || {
        let buffer = &scope.buffers[scope.buffer(&operand.name)?];
        if !buffer.scratch || buffer.array {
            return None;
        }
        crate::constant::value(buffer.len?)
    };
    let Some(range) = &operand.range else {
        return scratch_length();
    };
    let Expr::Range(range) = ungroup_expr(range) else {
        return None;
    };
    let start = match &range.start {
        Some(start) => crate::constant::value(start)?,
        None => 0,
    };
    let end = match (&range.end, range.limits) {
        (Some(end), syn::RangeLimits::HalfOpen(_)) => crate::constant::value(end)?,
        (Some(end), syn::RangeLimits::Closed(_)) => crate::constant::value(end)?.checked_add(1)?,
        (None, _) => scratch_length()?,
    };
    // An inverted range (`a[4..2]`) is reported by the range checks; it has no length.
    (end >= start).then_some(end - start)
}

/// An operand as written: `b[0..8]`, `d`.
pub(super) fn operand_text(operand: &ast::Operand) -> String {
    match &operand.range {
        Some(range) => format!("{}[{}]", operand.name, crate::ast::tokens_string(range)),
        None => operand.name.to_string(),
    }
}

/// Rule: the sends of a group carry what its receives take. Every rank runs the same group, so
/// each `send` of it arrives in a peer's `recv` of it, and NCCL pairs a send only with a
/// receive of as many elements of one type: where every length of the group is known
/// (constant ranges, scratch buffers of constant length) and the lengths sent differ from
/// those received, or every element type is a primitive and the types differ, no pairing
/// works, and the ranks fail (the CPU backend) or hang (NCCL).
fn sends_fit_receives(cx: &Ctxt, scope: &Scope<'_>, group: &[Statement]) {
    let (mut sends, mut recvs) = (Vec::new(), Vec::new());
    for statement in group {
        let Statement::Comm(comm) = statement else {
            continue;
        };
        match &comm.op {
            CommOp::Send { data, .. } => sends.push(data),
            CommOp::Recv { data, .. } => recvs.push(data),
            _ => {}
        }
    }
    // A group with one half, or more of one, is reported by `groups_pair`.
    if sends.is_empty() || sends.len() != recvs.len() {
        return;
    }
    let lengths = |operands: &[&ast::Operand]| -> Option<Vec<i128>> {
        operands.iter().map(|o| operand_length(scope, o)).collect()
    };
    let elems = |operands: &[&ast::Operand]| -> Option<Vec<String>> {
        operands
            .iter()
            .map(|o| {
                let elem = type_string(scope.buffers[scope.buffer(&o.name)?].elem?);
                crate::symbol::PRIMITIVE_SCALARS
                    .contains(&elem.as_str())
                    .then_some(elem)
            })
            .collect()
    };
    let unmatched = |sent: Vec<String>, taken: Vec<String>| -> Option<(usize, Vec<String>)> {
        let mut left = sent;
        let mut first = None;
        for (k, t) in taken.iter().enumerate() {
            match left.iter().position(|s| s == t) {
                Some(at) => {
                    left.remove(at);
                }
                None => {
                    first.get_or_insert(k);
                }
            }
        }
        first.map(|k| (k, left))
    };
    let listed = |values: &[String]| {
        let quoted: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
        quoted.join(" and ")
    };
    if let (Some(sent), Some(taken)) = (lengths(&sends), lengths(&recvs)) {
        let text = |v: Vec<i128>| v.into_iter().map(|n| n.to_string()).collect::<Vec<_>>();
        if let Some((k, left)) = unmatched(text(sent), text(taken.clone())) {
            recv_unpaired(cx, recvs[k], &taken[k].to_string(), &left, "");
            return;
        }
    }
    if lengths(&sends).is_none() || lengths(&recvs).is_none() {
        super::comm_lengths::lengths_differ(cx, scope, &sends, &recvs);
    }
    if let (Some(sent), Some(taken)) = (elems(&sends), elems(&recvs))
        && let Some((k, left)) = unmatched(sent, taken.clone())
    {
        let recv = recvs[k];
        cx.error_spanned_by(
            &recv.name,
            format!(
                "`recv {}` takes `{}`, but the `send`s of its group carry {}: every rank runs the same group, so a peer's `send` of this group arrives in this `recv`, and a send pairs only with a receive of one element type; receive into a buffer of {}",
                operand_text(recv),
                taken[k],
                listed(&left),
                listed(&left[..1.min(left.len())]),
            ),
        );
    }
}

/// Rule: `all_reduce(OP) SRC -> DST` and `broadcast SRC -> DST` move as many elements as
/// they write (NCCL takes one count for both): where both lengths are known, they are equal.
fn both_sides_one_length(cx: &Ctxt, scope: &Scope<'_>, comm: &Comm) {
    let (CommOp::AllReduce {
        src,
        dst: Some(dst),
        ..
    }
    | CommOp::Broadcast {
        src,
        dst: Some(dst),
        ..
    }) = &comm.op
    else {
        return;
    };
    let (Some(from), Some(to)) = (operand_length(scope, src), operand_length(scope, dst)) else {
        super::comm_lengths::one_length(cx, scope, comm, src, dst);
        return;
    };
    if from == to || from < 0 || to < 0 {
        return;
    }
    cx.error_between(
        src.name.span(),
        dst.name.span(),
        format!(
            "`{}{} {} -> {}` moves {from} elements into {to}: both sides of `{}` have one length; name {} elements on both sides",
            comm.word(),
            comm.reduce_op().map_or(String::new(), |op| format!("({op})")),
            operand_text(src),
            operand_text(dst),
            comm.word(),
            from.min(to),
        ),
    );
}

/// The communicator params of the pipeline, in declaration order.
pub fn communicators<'s>(scope: &'s Scope<'_>) -> Vec<&'s BufferDecl<'s>> {
    scope
        .buffers
        .iter()
        .filter(|buffer| buffer.is_communicator())
        .collect()
}

/// A pipeline that communicates declares exactly one communicator param: every statement
/// goes through it, so every rank orders its operations the same way.
fn communicator(cx: &Ctxt, scope: &Scope<'_>) {
    let declared = communicators(scope);
    if let [first, rest @ ..] = declared.as_slice() {
        for other in rest {
            cx.error_spanned_by(
                other.name,
                format!(
                    "a pipeline communicates through one communicator, and `{}` is already one; remove `{}`",
                    first.name, other.name
                ),
            );
        }
        return;
    }
    let first = scope.stages.iter().find_map(|stage| {
        stage
            .statements
            .iter()
            .find_map(|statement| match statement {
                Statement::Comm(comm) => Some(comm),
                _ => None,
            })
    });
    if let Some(comm) = first {
        cx.error_at(
            comm.keyword,
            format!(
                "`{}` goes through the pipeline's communicator, but none is declared; add `comm: &Communicator` to `params {{ ... }}` (an NCCL communicator on CUDA, a `World` rank on the CPU backend)",
                comm.word()
            ),
        );
    }
}

/// The rules on one statement.
fn statement(cx: &Ctxt, scope: &Scope<'_>, comm: &Comm) {
    let word = comm.word();
    let mut resolved: Vec<(&ast::Operand, &BufferDecl<'_>, bool)> = Vec::new();
    for (operand, writes) in comm.operands() {
        let role = format!("`{word}` moves a `DeviceBuffer`");
        let Some(buffer) = resolve(cx, scope, &operand.name, &role) else {
            continue;
        };
        let name = &operand.name;
        let hint = match buffer.memory {
            Memory::Device => None,
            Memory::Pinned => Some(format!(
                "{}; `{word}` moves device memory: `copy` it into a `DeviceBuffer` and use that",
                what(buffer)
            )),
            Memory::Flag | Memory::Condition | Memory::Pageable | Memory::Opaque => {
                Some(format!("{}; `{word}` moves a `DeviceBuffer`", what(buffer)))
            }
        };
        if let Some(hint) = hint {
            cx.error_spanned_by(name, hint);
            continue;
        }
        if writes {
            writable(cx, buffer, name, &format!("`{word}` writes it"));
        }
        if let Some(range) = &operand.range {
            element_range(cx, name, range);
        }
        resolved.push((operand, buffer, writes));
    }
    if let [(src, src_buffer, false), (dst, dst_buffer, true)] = resolved.as_slice() {
        same_element(cx, word, src, src_buffer, dst, dst_buffer);
    }
    if let Some(op) = comm.reduce_op() {
        let elem = resolved.first().and_then(|(_, buffer, _)| buffer.elem);
        reduce_operator(cx, word, op, elem);
    }
}

/// `[RANGE]` is an element range: `[a..b]`, `[a..]`, `[..b]`, `[a..=b]` or `[..]`.
fn element_range(cx: &Ctxt, name: &Ident, range: &Expr) {
    if !matches!(ungroup_expr(range), Expr::Range(_)) {
        cx.error_spanned_by(
            range,
            format!(
                "`[...]` after `{name}` takes an element range such as `[0..n]`; for one element write `[i..i + 1]`"
            ),
        );
    }
}

/// The two sides of a collective are two buffers (or ranges of two buffers) of one element
/// type. The same buffer on both sides is the in-place form, written with one operand.
fn same_element(
    cx: &Ctxt,
    word: &str,
    src: &ast::Operand,
    src_buffer: &BufferDecl<'_>,
    dst: &ast::Operand,
    dst_buffer: &BufferDecl<'_>,
) {
    if src.name == dst.name {
        let name = &dst.name;
        let range = |operand: &ast::Operand| {
            operand
                .range
                .as_ref()
                .map(|r| format!("[{}]", crate::ast::tokens_string(r)))
        };
        let (from, to) = (range(src), range(dst));
        let in_place = matches!(word, "all_reduce" | "broadcast") && from == to;
        let hint = match (&from, &to) {
            _ if in_place => format!(
                "for the in-place form write one operand, e.g. `{word}{} {name}{}`",
                if word == "all_reduce" { "(sum)" } else { "" },
                from.as_deref().unwrap_or("")
            ),
            (None, None) => "use two different buffers".to_owned(),
            // Two ranges of one buffer: the collective is given its two sides as two buffers.
            _ => format!(
                "a collective takes its two sides as two buffers, so one buffer cannot be both, \
                 even in ranges that do not overlap; {word} into a buffer of its own (a scratch \
                 buffer) and `copy` that into `{name}{}`",
                to.as_deref().unwrap_or("")
            ),
        };
        cx.error_spanned_by(
            name,
            format!("`{word}` reads and writes `{name}` at once; {hint}"),
        );
        return;
    }
    if let (Some(from), Some(to)) = (
        src_buffer.elem.map(type_string),
        dst_buffer.elem.map(type_string),
    ) && distinct_primitives(&from, &to)
    {
        cx.error_between(
            src.name.span(),
            dst.name.span(),
            format!(
                "`{word} {} -> {}` moves `{from}` into `{to}`; both buffers must hold the same element type",
                src.name, dst.name
            ),
        );
    }
}

/// The operator is one NCCL has, and `avg` reduces floats only (both backends refuse an
/// integer mean; a sum divided by the number of ranks says what is meant).
fn reduce_operator(cx: &Ctxt, word: &str, op: &Ident, elem: Option<&syn::Type>) {
    let names: Vec<String> = REDUCE_OPS
        .iter()
        .map(|(name, _)| (*name).to_owned())
        .collect();
    if !REDUCE_OPS.iter().any(|(name, _)| op == name) {
        let hint = suggestion(
            op,
            &names,
            "write one of `sum`, `prod`, `max`, `min`, `avg`",
        );
        cx.error_spanned_by(op, format!("`{word}` has no operator `{op}`; {hint}"));
        return;
    }
    let integer = elem
        .map(type_string)
        .is_some_and(|ty| ["i8", "u8", "i32", "u32", "i64", "u64"].contains(&ty.as_str()));
    if op == "avg" && integer {
        cx.error_spanned_by(
            op,
            format!(
                "`{word}(avg)` needs a floating-point element type, not `{}`; reduce with `sum` and divide by the number of ranks",
                elem.map(type_string).unwrap_or_default()
            ),
        );
    }
}

/// Whether `expr` is `<something>.rank()` (in parentheses or not): the calling rank.
fn is_own_rank(expr: &Expr) -> bool {
    matches!(ungroup_expr(expr), Expr::MethodCall(call) if call.method == "rank" && call.args.is_empty())
}

/// Rule: a `send` to the rank that runs the step (`to comm.rank()`) is received only by a
/// `recv ... from comm.rank()` of the same group (NCCL pairs a rank's send to itself with its
/// own receive of that group), and the other way round; unpaired, it waits for ever.
fn self_sends_pair(cx: &Ctxt, group: &[Statement]) {
    let to_self = |want_send: bool| {
        group
            .iter()
            .filter_map(move |s| match s {
                Statement::Comm(comm) => match &comm.op {
                    CommOp::Send { peer, .. } if want_send && is_own_rank(peer) => Some(peer),
                    CommOp::Recv { peer, .. } if !want_send && is_own_rank(peer) => Some(peer),
                    _ => None,
                },
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let (sends, recvs) = (to_self(true), to_self(false));
    let (extra, word, other) = if sends.len() > recvs.len() {
        (sends.get(recvs.len()), "send ... to", "recv ... from")
    } else {
        (recvs.get(sends.len()), "recv ... from", "send ... to")
    };
    if let Some(peer) = extra {
        cx.error_spanned_by(
            peer,
            format!(
                "`{word} {}` names the rank that runs the step, which pairs only with a \
                 `{other} {}` in the same group (the communication statements next to it); add \
                 one there, or name another rank",
                crate::ast::tokens_string(peer),
                crate::ast::tokens_string(peer),
            ),
        );
    }
}

/// Rule: a broadcast's root is one rank, the same on every rank. `from comm.rank()` makes
/// every rank the root: each would send its own buffer and none receive (NCCL pairs them as
/// mismatched broadcasts, which hang or fail at the deadline).
fn root_is_one_rank(cx: &Ctxt, comm: &Comm) {
    let CommOp::Broadcast { root, .. } = &comm.op else {
        return;
    };
    if is_own_rank(root) {
        cx.error_spanned_by(
            root,
            format!(
                "`{}` is the rank that runs the step, so every rank would be the root of this \
                 `broadcast` and none would receive; name one rank, the same on all (`from 0`, \
                 or a scalar param)",
                crate::ast::tokens_string(root)
            ),
        );
    }
}

/// Ranges, peers and roots are computed on the host when the step is enqueued: a buffer in
/// them (other than its length, or the communicator's rank and size) would be read before
/// the stages that write it have run.
fn expressions(cx: &Ctxt, scope: &Scope<'_>, comm: &Comm) {
    let word = comm.word();
    for expr in comm.expressions() {
        let role = match &comm.op {
            CommOp::Send { peer, .. } | CommOp::Recv { peer, .. } if std::ptr::eq(peer, expr) => {
                "the peer"
            }
            CommOp::Broadcast { root, .. } if std::ptr::eq(root, expr) => "the root",
            _ => "a range",
        };
        for mention in buffers(scope, &mentions(expr)) {
            if mention.use_ == Use::Length {
                continue;
            }
            let name = &mention.ident;
            cx.error_spanned_by(
                name,
                format!(
                    "`{name}` is a buffer, used in {role} of `{word}`: it is computed on the host when the step is enqueued, before the stages that write `{name}` have run; use a scalar param, `{name}.len()`, or the communicator's `rank()` and `size()`"
                ),
            );
        }
    }
}

/// Rule: a communication statement does not write a range of a scratch buffer computed from
/// the communicator (`recv t[0..comm.size()]`). The step's plan is computed from scalar params,
/// so such a range counts as the whole buffer (`Scope::comm_operand_ref`): for ordering that
/// is the safe side, but as a write it would count every element of `t` as written, and a
/// later read of elements it did not write would find undefined contents unrefused. The
/// error, on the communicator, says to pass its size (or rank) as a scalar param.
fn scratch_written_over_the_communicator(cx: &Ctxt, scope: &Scope<'_>, comm: &Comm) {
    let word = comm.word();
    for (operand, writes) in comm.operands() {
        let Some(range) = &operand.range else {
            continue;
        };
        let Some(id) = scope.buffer(&operand.name) else {
            continue;
        };
        if !writes || !scope.buffers[id].scratch {
            continue;
        }
        // Another buffer named in a range is refused by `expressions`.
        let Some(mention) = scope.buffer_named_in(range).filter(|mention| {
            scope
                .buffer(&mention.ident)
                .is_some_and(|b| scope.buffers[b].is_communicator())
        }) else {
            continue;
        };
        let name = &mention.ident;
        let (method, param) = if communicator_methods(range, name)
            .iter()
            .any(|m| m == "rank")
        {
            ("rank", "rank")
        } else {
            ("size", "ranks")
        };
        let scratch = &operand.name;
        cx.error_spanned_by(
            name,
            format!(
                "`{name}` is the communicator, used in the range `{word}` writes of scratch buffer `{scratch}`: the step checks that each element of a scratch buffer is written before anything reads it, from ranges computed from scalar params, and this one would count as all of `{scratch}`; pass the communicator's {method} as a scalar param (`{param}: usize`, set from `{name}.{method}()`) and use that"
            ),
        );
    }
}

/// The names of the methods `expr` calls on `receiver` (`size` in `comm.size() * nx`).
fn communicator_methods(expr: &Expr, receiver: &Ident) -> Vec<String> {
    struct Calls<'r> {
        receiver: &'r Ident,
        found: Vec<String>,
    }
    impl<'ast> syn::visit::Visit<'ast> for Calls<'_> {
        fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
            if ast::bare_ident(&call.receiver) == Some(self.receiver) {
                self.found.push(call.method.to_string());
            }
            syn::visit::visit_expr_method_call(self, call);
        }
    }
    let mut calls = Calls {
        receiver,
        found: Vec::new(),
    };
    syn::visit::Visit::visit_expr(&mut calls, expr);
    calls.found
}

/// The error on a `recv` whose length, `taken`, no `send` of its group carries (`carried`:
/// the lengths the sends left unpaired, as the message shows them); `qualifier` follows the
/// carried lengths (", whatever the params are" where they are polynomials of params).
pub(super) fn recv_unpaired(
    cx: &Ctxt,
    recv: &ast::Operand,
    taken: &str,
    carried: &[String],
    qualifier: &str,
) {
    cx.error_between(
        recv.name.span(),
        recv.range
            .as_ref()
            .and_then(|range| range.to_token_stream().into_iter().last())
            .map_or(recv.name.span(), |last| last.span()),
        format!(
            "`recv {}` takes {taken} elements, but the `send`s of its group carry {} elements{qualifier}: every rank runs the same group, so a peer's `send` of this group arrives in this `recv`, and a send pairs only with a receive of as many elements; receive {} elements, or send {taken}",
            operand_text(recv),
            carried.join(" and "),
            carried.first().map_or("", String::as_str),
        ),
    );
}
