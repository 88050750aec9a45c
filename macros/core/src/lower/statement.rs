//! Lowering one stage and its statements: names resolved to ids, each statement's accesses
//! derived (the ranges it reads and writes), and the scalars it reads.

use super::*;

pub(super) fn lower_stage<'a>(
    scope: &Scope<'a>,
    id: usize,
    decl: &'a ast::Stage,
) -> Result<Stage<'a>, Unresolved> {
    let stream = scope
        .stream(&decl.stream)
        .ok_or_else(|| unresolved(&decl.stream))?;
    let looped = scope.stage_loops.get(id).copied().flatten();
    let after = decl
        .after
        .iter()
        .map(|name| {
            scope
                .stage(name)
                .map(StageId)
                .ok_or_else(|| unresolved(name))
        })
        .collect::<Result<_, _>>()?;
    let statements: Vec<Statement<'a>> = decl
        .statements
        .iter()
        .map(|statement| lower_statement(scope, looped.map(|l| scope.loops[l]), statement))
        .collect::<Result<_, _>>()?;
    Ok(Stage {
        decl,
        name: name(&decl.name),
        stream: StreamId(stream),
        accesses: merged(&statements),
        statements,
        after,
        kind: scope.stage_kinds.get(id).copied().unwrap_or(0),
        looped,
        lane: decl.lane.as_ref(),
    })
}

pub(super) fn unresolved(ident: &Ident) -> Unresolved {
    Unresolved {
        what: ident.to_string(),
        span: ident.span(),
    }
}

pub(super) fn buffer(scope: &Scope<'_>, ident: &Ident) -> Result<BufferId, Unresolved> {
    scope
        .buffer(ident)
        .map(BufferId)
        .ok_or_else(|| unresolved(ident))
}

/// The buffers a `host` or `call` statement declares it reads and writes.
fn declared(
    scope: &Scope<'_>,
    accesses: &ast::Accesses,
) -> Result<(Vec<BufferId>, Vec<BufferId>), Unresolved> {
    let reads = accesses.reads().map(|name| buffer(scope, name));
    let writes = accesses.writes().map(|name| buffer(scope, name));
    Ok((
        reads.collect::<Result<_, _>>()?,
        writes.collect::<Result<_, _>>()?,
    ))
}

pub(super) fn lower_statement<'a>(
    scope: &Scope<'a>,
    looped: Option<&'a ast::ForLoop>,
    statement: &'a ast::Statement,
) -> Result<Statement<'a>, Unresolved> {
    let kind = match statement {
        ast::Statement::Launch(launch) => {
            let (module, kernel) = launch.target().ok_or_else(|| Unresolved {
                what: ast::tokens_string(&launch.path),
                span: launch.keyword.span,
            })?;
            let module = scope.module(module).ok_or_else(|| unresolved(module))?;
            let kernel_id = scope
                .kernel(module, kernel)
                .ok_or_else(|| unresolved(kernel))?;
            let decl = scope.kernels[kernel_id].decl;
            let args = decl
                .params
                .iter()
                .zip(&launch.args)
                .map(|(param, arg)| lower_arg(scope, param, arg))
                .collect::<Result<_, _>>()?;
            StatementKind::Launch {
                source: launch,
                kernel: KernelId(kernel_id),
                args,
            }
        }
        ast::Statement::Copy(copy) => StatementKind::Copy {
            source: copy,
            src: buffer(scope, &copy.src)?,
            dst: buffer(scope, &copy.dst)?,
        },
        ast::Statement::Fill(fill) => StatementKind::Fill {
            source: fill,
            dst: buffer(scope, &fill.dst)?,
        },
        ast::Statement::Wait(wait) => StatementKind::Wait {
            source: wait,
            flag: buffer(scope, &wait.flag)?,
            condition: wait.condition,
        },
        ast::Statement::Write(write) => StatementKind::Write {
            source: write,
            flag: buffer(scope, &write.flag)?,
        },
        ast::Statement::Host(host) => {
            declared(scope, &host.accesses)?;
            StatementKind::Host { source: host }
        }
        ast::Statement::Call(call) => {
            let (_, writes) = declared(scope, &call.accesses)?;
            let args = call
                .call
                .args
                .iter()
                .map(|arg| lower_call_arg(scope, arg, &writes))
                .collect();
            StatementKind::Call { source: call, args }
        }
        ast::Statement::Control(control) => return control::lower(scope, looped, control),
        ast::Statement::Comm(comm) => collective::lower(scope, comm)?,
        ast::Statement::NotCapturable(statement) => return Err(unresolved(&statement.word)),
    };
    let scalars = scalars_with_lets(scope, looped, expressions(&kind));
    Ok(Statement {
        accesses: accesses(scope, &kind),
        scalars,
        kind,
    })
}

/// How a `call` passes one argument. A buffer declared in `writes(...)` is passed mutably
/// unless written as `&x`; `check` made sure every buffer named is declared.
fn lower_call_arg<'a>(scope: &Scope<'a>, arg: &'a Expr, writes: &[BufferId]) -> CallArg<'a> {
    let declared = |buffer: BufferId| {
        if writes.contains(&buffer) {
            Mode::Write
        } else {
            Mode::Read
        }
    };
    let whole = match ungroup_expr(arg) {
        Expr::Reference(reference) => {
            bare_ident(&reference.expr).map(|name| (name, Some(reference.mutability.is_some())))
        }
        arg => bare_ident(arg).map(|name| (name, None)),
    };
    if let Some((name, reference)) = whole
        && let Some(id) = scope.buffer(name)
    {
        let declared = declared(BufferId(id));
        let mode = match reference {
            Some(false) => Mode::Read,
            _ => declared,
        };
        return CallArg::Buffer {
            name,
            mode,
            declared,
        };
    }
    let mut buffers: Vec<(BufferId, Mode)> = Vec::new();
    for mention in ast::mentions(arg) {
        if let Some(id) = scope.buffer(&mention.ident) {
            let buffer = BufferId(id);
            if !buffers.iter().any(|&(b, _)| b == buffer) {
                buffers.push((buffer, declared(buffer)));
            }
        }
    }
    CallArg::Expr { expr: arg, buffers }
}

/// The scalar params `tokens` read, directly or through the `let`s of the loop they sit in
/// (a `let` the tokens name brings the scalars it reads, earlier `let`s included).
pub(super) fn scalars_with_lets(
    scope: &Scope<'_>,
    looped: Option<&ast::ForLoop>,
    tokens: TokenStream,
) -> BTreeSet<ScalarId> {
    let mut scalars = scalars_read(scope, tokens.clone());
    if let Some(body) = looped {
        let mut wanted_names: Vec<String> = token_mentions(tokens)
            .iter()
            .map(|m| m.ident.to_string())
            .collect();
        for binding in body.lets.iter().rev() {
            if wanted_names.iter().any(|n| binding.name == n) {
                scalars.extend(scalars_read(scope, binding.value.to_token_stream()));
                wanted_names.extend(
                    token_mentions(binding.value.to_token_stream())
                        .iter()
                        .map(|m| m.ident.to_string()),
                );
            }
        }
    }
    scalars
}

/// The tokens of a statement's expressions: what it may read scalars from.
fn expressions(kind: &StatementKind<'_>) -> TokenStream {
    let mut tokens = TokenStream::new();
    match kind {
        StatementKind::Launch { source, .. } => {
            source.args.to_tokens(&mut tokens);
            for rank in source.ranks.iter().flatten() {
                rank.expr.to_tokens(&mut tokens);
            }
            for option in [&source.grid, &source.block, &source.shared]
                .into_iter()
                .flatten()
            {
                option.value.to_tokens(&mut tokens);
            }
        }
        StatementKind::Copy { .. } => {}
        StatementKind::Fill { source, .. } => source.value.to_tokens(&mut tokens),
        StatementKind::Wait { source, .. } => source.value.to_tokens(&mut tokens),
        StatementKind::Write { source, .. } => source.value.to_tokens(&mut tokens),
        StatementKind::Host { source, .. } => source.closure.to_tokens(&mut tokens),
        StatementKind::Call { source, .. } => source.call.to_tokens(&mut tokens),
        // Lowered whole in `control.rs`, with its body's scalars.
        StatementKind::Control(_) => {}
        StatementKind::Comm { source, .. } => collective::expressions(source, &mut tokens),
    }
    tokens
}

/// The scalar params that `tokens` name: every identifier (and format-string argument) that
/// is a scalar param's name. Generous on purpose: a scalar read by mistake costs a setter a
/// re-capture, a scalar missed would keep a stale value in a replayed graph.
pub(super) fn scalars_read(scope: &Scope<'_>, tokens: TokenStream) -> BTreeSet<ScalarId> {
    token_mentions(tokens)
        .iter()
        .filter_map(|mention| match scope.value(&mention.ident)? {
            Value::Scalar(id) => Some(ScalarId(id)),
            Value::Buffer(_) => None,
        })
        .collect()
}

fn lower_arg(scope: &Scope<'_>, param: &ast::KernelParam, arg: &Expr) -> Result<Arg, Unresolved> {
    match param.kind() {
        KernelParamType::Slice { mutable, .. } => {
            let ident = BufRef::of_expr(arg)
                .map(|r| r.name)
                .ok_or_else(|| unresolved(&param.name))?;
            let mode = if mutable { Mode::Write } else { Mode::Read };
            Ok(Arg::Buffer {
                buffer: buffer(scope, ident)?,
                mode,
            })
        }
        KernelParamType::Scalar(ty) => {
            let ty = type_string(ty);
            let param = match bare_ident(arg).and_then(|ident| scope.value(ident)) {
                Some(Value::Scalar(id)) => Some(id),
                Some(Value::Buffer(_)) => return Err(unresolved(&param.name)),
                None => None,
            };
            let assert_type = param.is_none_or(|id| type_string(&scope.scalars[id].ty) != ty);
            Ok(Arg::Scalar {
                ty,
                param: param.map(ScalarId),
                assert_type,
            })
        }
        // The kernel writes the condition's handle (its word, eagerly).
        KernelParamType::Condition => {
            let ident = bare_ident(arg).ok_or_else(|| unresolved(&param.name))?;
            Ok(Arg::Buffer {
                buffer: buffer(scope, ident)?,
                mode: Mode::Write,
            })
        }
        KernelParamType::Unsupported => Err(unresolved(&param.name)),
    }
}

/// The buffers one statement touches, in the order it names them.
fn accesses<'a>(scope: &Scope<'a>, kind: &StatementKind<'a>) -> Vec<Touch<'a>> {
    let touch = |name: &'a Ident, mode: Mode| {
        scope.buffer(name).map(|id| Touch {
            buffer: BufferId(id),
            mode,
            name,
            subscript: None,
        })
    };
    let touch_ref = |reference: BufRef<'a>, mode: Mode| {
        scope.buffer(reference.name).map(|id| Touch {
            buffer: BufferId(id),
            mode,
            name: reference.name,
            subscript: reference.is_subscripted().then_some(reference),
        })
    };
    // A buffer in `writes(...)` is written (and maybe read); one only in `reads(...)` is read.
    let declared = |accesses: &'a ast::Accesses| {
        let writes: Vec<&Ident> = accesses.writes().collect();
        let reads = accesses
            .reads()
            .filter(move |name| !writes.contains(name))
            .map(|name| (name, Mode::Read));
        let writes = accesses.writes().map(|name| (name, Mode::Write));
        reads
            .chain(writes)
            .filter_map(|(name, mode)| touch(name, mode))
            .collect::<Vec<_>>()
    };
    match kind {
        StatementKind::Launch { source, args, .. } => args
            .iter()
            .zip(&source.args)
            .filter_map(|(arg, expr)| match arg {
                // A window is one resource to the ordering (its part here and the neighbours'
                // it writes): its statements run in program order on the rank, and its ranges
                // are the runtime's to check (`window_views`).
                Arg::Buffer { buffer, mode } if scope.buffers[buffer.0].is_window() => {
                    touch(BufRef::of_expr(expr)?.name, *mode)
                }
                Arg::Buffer { mode, .. } => touch_ref(BufRef::of_expr(expr)?, *mode),
                Arg::Scalar { .. } => None,
            })
            .collect(),
        StatementKind::Copy { source, .. } => [
            touch_ref(source.src_ref.borrow(), Mode::Read),
            touch_ref(source.dst_ref.borrow(), Mode::Write),
        ]
        .into_iter()
        .flatten()
        .collect(),
        StatementKind::Fill { source, .. } => touch_ref(source.dst_ref.borrow(), Mode::Write)
            .into_iter()
            .collect(),
        StatementKind::Wait { source, .. } => touch(&source.flag, Mode::Read).into_iter().collect(),
        StatementKind::Write { source, .. } => {
            touch(&source.flag, Mode::Write).into_iter().collect()
        }
        StatementKind::Host { source } => declared(&source.accesses),
        StatementKind::Call { source, .. } => declared(&source.accesses),
        StatementKind::Control(control) => control.accesses(),
        StatementKind::Comm {
            source,
            communicator,
            ..
        } => collective::accesses(scope, source, *communicator),
    }
}

/// The buffers a stage touches, in first-use order, each once per constant range (a
/// subscript the macro cannot compute, or an element of an array, counts as the whole
/// buffer); a write covers a read.
fn merged(statements: &[Statement<'_>]) -> Vec<Access> {
    let mut order = Vec::new();
    let mut modes = BTreeMap::new();
    for touch in statements.iter().flat_map(|statement| &statement.accesses) {
        let extent = match touch.subscript {
            Some(reference) if reference.index.is_none() => extent(&reference).flatten(),
            _ => None,
        };
        let key = (touch.buffer, extent);
        let entry = modes.entry(key).or_insert_with(|| {
            order.push(key);
            touch.mode
        });
        *entry = (*entry).max(touch.mode);
    }
    order
        .into_iter()
        .filter_map(|key| {
            Some(Access {
                buffer: key.0,
                mode: *modes.get(&key)?,
                extent: key.1,
            })
        })
        .collect()
}
