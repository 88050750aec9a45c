//! The `Parse` impls of the pipeline's items, streams, modules, kernels, stages and
//! statements: the grammar documented at the crate root. Each keeps the user's own tokens
//! for later errors; a repeated option is refused at its second occurrence.

use super::*;

impl Parse for Pipeline {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis = input.parse()?;
        let pipeline_token = input.parse()?;
        let name = input.parse()?;
        let content;
        braced!(content in input);
        let mut items = Vec::new();
        while !content.is_empty() {
            items.push(content.parse()?);
        }
        Ok(Pipeline {
            attrs,
            vis,
            pipeline_token,
            name,
            items,
        })
    }
}

impl Parse for Item {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let lookahead = input.lookahead1();
        if lookahead.peek(kw::streams) {
            let keyword = input.parse()?;
            let streams = braced_list(input)?;
            Ok(Item::Streams(Streams {
                attrs,
                keyword,
                streams,
            }))
        } else if lookahead.peek(kw::kernels) {
            parse_module(input, attrs, None).map(Item::Kernels)
        } else if input.peek(Token![unsafe]) && input.peek2(kw::kernels) {
            let unsafe_token = input.parse()?;
            parse_module(input, attrs, Some(unsafe_token)).map(Item::Kernels)
        } else if lookahead.peek(kw::params) {
            let keyword = input.parse()?;
            let params = braced_list(input)?;
            Ok(Item::Params(Params {
                attrs,
                keyword,
                params,
            }))
        } else if lookahead.peek(kw::scratch) {
            let keyword = input.parse()?;
            let buffers = braced_list(input)?;
            Ok(Item::Scratch(ScratchBlock {
                attrs,
                keyword,
                buffers,
            }))
        } else if lookahead.peek(kw::stage) {
            parse_stage(input, attrs).map(Item::Stage)
        } else if lookahead.peek(Token![for]) {
            parse_for(input).map(Item::For)
        } else if lookahead.peek(kw::step) && input.peek2(Ident) {
            let keyword = input.parse()?;
            let name = input.parse()?;
            let content;
            braced!(content in input);
            let mut items = Vec::new();
            while !content.is_empty() {
                items.push(content.parse()?);
            }
            Ok(Item::Step(StepBlock {
                attrs,
                keyword,
                name,
                items,
            }))
        } else if lookahead.peek(kw::swap) {
            Ok(Item::Swap(input.parse()?))
        } else if lookahead.peek(kw::concurrent) {
            let keyword = input.parse()?;
            let content;
            parenthesized!(content in input);
            let stages = Punctuated::parse_terminated(&content)?;
            input.parse::<Token![;]>()?;
            Ok(Item::Concurrent(Concurrent { keyword, stages }))
        } else if lookahead.peek(kw::devices) {
            let keyword = input.parse()?;
            let devices = braced_list(input)?;
            Ok(Item::Devices(Devices {
                attrs,
                keyword,
                devices,
            }))
        } else {
            Err(lookahead.error())
        }
    }
}

/// `{ a, b, c }` with an optional trailing comma.
pub(super) fn braced_list<T: Parse>(input: ParseStream<'_>) -> syn::Result<Vec<T>> {
    let content;
    braced!(content in input);
    let list = Punctuated::<T, Token![,]>::parse_terminated(&content)?;
    Ok(list.into_iter().collect())
}

impl Parse for Stream {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let name: Ident = input.parse()?;
        let count = if input.peek(token::Bracket) {
            let content;
            bracketed!(content in input);
            Some(content.parse()?)
        } else {
            None
        };
        let mut priority = None;
        let mut non_blocking = None;
        if input.peek(token::Paren) {
            let content;
            parenthesized!(content in input);
            while !content.is_empty() {
                let lookahead = content.lookahead1();
                if lookahead.peek(kw::priority) {
                    let keyword: kw::priority = content.parse()?;
                    content.parse::<Token![=]>()?;
                    if priority.replace(content.call(parse_priority)?).is_some() {
                        let message = format!("`priority` set twice on stream `{name}`; keep one");
                        return Err(syn::Error::new(keyword.span, message));
                    }
                } else if lookahead.peek(kw::non_blocking) {
                    let keyword: kw::non_blocking = content.parse()?;
                    if non_blocking.replace(keyword).is_some() {
                        let message =
                            format!("`non_blocking` set twice on stream `{name}`; keep one");
                        return Err(syn::Error::new(keyword.span, message));
                    }
                } else {
                    return Err(lookahead.error());
                }
                if !content.is_empty() {
                    content.parse::<Token![,]>()?;
                }
            }
        }
        let device = OnDevice::parse_optional(input)?;
        Ok(Stream {
            attrs,
            name,
            priority,
            non_blocking,
            device,
            count,
        })
    }
}

/// `high`, `low`, `default` or an integer (CUDA's convention: lower numbers run first).
pub(super) fn parse_priority(input: ParseStream<'_>) -> syn::Result<PriorityOption> {
    let span = input.span();
    let lookahead = input.lookahead1();
    let level = if lookahead.peek(kw::high) {
        input.parse::<kw::high>()?;
        Priority::High
    } else if lookahead.peek(kw::low) {
        input.parse::<kw::low>()?;
        Priority::Low
    } else if lookahead.peek(kw::default) {
        input.parse::<kw::default>()?;
        Priority::Default
    } else if lookahead.peek(LitInt) || lookahead.peek(Token![-]) {
        let negative = input.parse::<Option<Token![-]>>()?.is_some();
        let literal: LitInt = input.parse()?;
        let magnitude: i64 = literal.base10_parse()?;
        let value = if negative { -magnitude } else { magnitude };
        let value = i32::try_from(value)
            .map_err(|_| syn::Error::new(literal.span(), "stream priority must fit in an `i32`"))?;
        Priority::Value(value)
    } else {
        return Err(lookahead.error());
    };
    Ok(PriorityOption { level, span })
}

pub(super) fn parse_module(
    input: ParseStream<'_>,
    attrs: Vec<Attribute>,
    unsafe_token: Option<Token![unsafe]>,
) -> syn::Result<Module> {
    let keyword = input.parse()?;
    let name = input.parse()?;
    input.parse::<Token![=]>()?;
    let format_span = input.span();
    let lookahead = input.lookahead1();
    let format = if lookahead.peek(kw::ptx) {
        input.parse::<kw::ptx>()?;
        ImageFormat::Ptx
    } else if lookahead.peek(kw::cubin) {
        input.parse::<kw::cubin>()?;
        ImageFormat::Cubin
    } else if lookahead.peek(kw::fatbin) {
        input.parse::<kw::fatbin>()?;
        ImageFormat::Fatbin
    } else if lookahead.peek(kw::cuda_c) {
        input.parse::<kw::cuda_c>()?;
        ImageFormat::CudaC
    } else {
        return Err(lookahead.error());
    };
    let image_content;
    parenthesized!(image_content in input);
    let image = image_content.parse()?;
    refuse_image_path(&image, format)?;
    let content;
    braced!(content in input);
    let mut kernels = Vec::new();
    while !content.is_empty() {
        kernels.push(content.parse()?);
    }
    Ok(Module {
        unsafe_token,
        attrs,
        keyword,
        name,
        format,
        format_span,
        image,
        kernels,
    })
}

/// Refuses a string literal naming a file where the module's image belongs (`ptx("k.ptx")`):
/// the macro takes the image itself, which `include_str!`/`include_bytes!` embed.
fn refuse_image_path(image: &syn::Expr, format: ImageFormat) -> syn::Result<()> {
    let syn::Expr::Lit(syn::ExprLit {
        lit: syn::Lit::Str(text),
        ..
    }) = image
    else {
        return Ok(());
    };
    let value = text.value();
    let extensions = [".ptx", ".cu", ".cuh", ".cubin", ".fatbin", ".fatbin.c"];
    let path_like = !value.trim().is_empty()
        && !value.contains('\n')
        && !value.contains(char::is_whitespace)
        && (value.contains('/') || extensions.iter().any(|e| value.ends_with(e)));
    if !path_like {
        return Ok(());
    }
    let (keyword, include) = match format {
        ImageFormat::Ptx => ("ptx", "include_str!"),
        ImageFormat::CudaC => ("cuda_c", "include_str!"),
        ImageFormat::Cubin => ("cubin", "include_bytes!"),
        ImageFormat::Fatbin => ("fatbin", "include_bytes!"),
    };
    Err(syn::Error::new(
        text.span(),
        format!(
            "`{keyword}(..)` takes the module's image, not a path to it: embed the file with \
             `{keyword}({include}(\"{value}\"))` (the path relative to this source file)"
        ),
    ))
}

impl Parse for Kernel {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let fn_token = input.parse()?;
        let name: Ident = input.parse()?;
        let content;
        parenthesized!(content in input);
        let params = Punctuated::<KernelParam, Token![,]>::parse_terminated(&content)?;
        let mut host = None;
        loop {
            let lookahead = input.lookahead1();
            if lookahead.peek(Token![;]) {
                input.parse::<Token![;]>()?;
                break;
            } else if lookahead.peek(kw::cpu) || lookahead.peek(kw::host) {
                let keyword = if input.peek(kw::cpu) {
                    input.parse::<kw::cpu>()?.span
                } else {
                    input.parse::<kw::host>()?.span
                };
                input.parse::<Token![=]>()?;
                let path = input.call(Path::parse_mod_style)?;
                if host.replace(HostImpl { keyword, path }).is_some() {
                    let message = format!(
                        "the CPU implementation of kernel `{name}` is set twice; keep one `cpu = ...`"
                    );
                    return Err(syn::Error::new(keyword, message));
                }
            } else {
                return Err(lookahead.error());
            }
        }
        let params = params.into_iter().collect();
        Ok(Kernel {
            attrs,
            fn_token,
            name,
            params,
            host,
        })
    }
}

impl Parse for KernelParam {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let name = input.parse()?;
        input.parse::<Token![:]>()?;
        let ty = input.parse()?;
        Ok(KernelParam { name, ty })
    }
}

impl Parse for Param {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let name = input.parse()?;
        input.parse::<Token![:]>()?;
        let ty = input.parse()?;
        let device = OnDevice::parse_optional(input)?;
        Ok(Param {
            attrs,
            name,
            ty,
            device,
        })
    }
}

impl Parse for Scratch {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let name = input.parse()?;
        input.parse::<Token![:]>()?;
        let ty = input.parse()?;
        let device = OnDevice::parse_optional(input)?;
        let len = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            Some(input.parse()?)
        } else {
            None
        };
        Ok(Scratch {
            attrs,
            name,
            ty,
            device,
            len,
        })
    }
}

pub(super) fn parse_stage(input: ParseStream<'_>, attrs: Vec<Attribute>) -> syn::Result<Stage> {
    let keyword = input.parse()?;
    let name = input.parse()?;
    input.parse::<kw::on>()?;
    let stream = input.parse()?;
    let lane = if input.peek(token::Bracket) {
        let content;
        bracketed!(content in input);
        Some(content.parse()?)
    } else {
        None
    };
    let mut after = Vec::new();
    if input.peek(kw::after) {
        input.parse::<kw::after>()?;
        loop {
            after.push(input.parse()?);
            if !input.peek(Token![,]) {
                break;
            }
            input.parse::<Token![,]>()?;
        }
    }
    let content;
    braced!(content in input);
    let mut statements = Vec::new();
    while !content.is_empty() {
        statements.push(content.parse()?);
    }
    Ok(Stage {
        attrs,
        keyword,
        name,
        stream,
        lane,
        after,
        statements,
    })
}

/// `for i in START..END { let ...; stage ...; concurrent(...); }`.
pub(super) fn parse_for(input: ParseStream<'_>) -> syn::Result<ForLoop> {
    let keyword = input.parse()?;
    let var = input.parse()?;
    input.parse::<Token![in]>()?;
    let range = input.call(Expr::parse_without_eager_brace)?;
    let (start, end) = match ungroup_expr(&range) {
        Expr::Range(syn::ExprRange {
            start: Some(start),
            limits: syn::RangeLimits::HalfOpen(_),
            end: Some(end),
            ..
        }) => ((**start).clone(), (**end).clone()),
        _ => {
            return Err(syn::Error::new_spanned(
                &range,
                "a pipeline `for` runs over a half-open range: `for i in START..END`",
            ));
        }
    };
    let content;
    braced!(content in input);
    let mut lets = Vec::new();
    while content.peek(Token![let]) {
        let keyword = content.parse()?;
        let name = content.parse()?;
        content.parse::<Token![=]>()?;
        let value = content.parse()?;
        content.parse::<Token![;]>()?;
        lets.push(Let {
            keyword,
            name,
            value,
        });
    }
    let mut items = Vec::new();
    while !content.is_empty() {
        items.push(content.parse()?);
    }
    Ok(ForLoop {
        keyword,
        var,
        start,
        end,
        lets,
        items,
    })
}

impl Parse for Statement {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if input.peek(Token![else]) {
            return Err(input.error(
                "`else` follows the `}` of an `if` body: `if residual > tol { ... } else { ... }` \
                 (a `while`, `do ... while` or `switch` has none, and an `if` has one `else`)",
            ));
        }
        if input.peek(kw::swap) {
            // The user's two names, where the statement has them.
            let fork = input.fork();
            let names = (|| -> syn::Result<(Ident, Ident)> {
                fork.parse::<kw::swap>()?;
                let content;
                syn::parenthesized!(content in fork);
                let first: Ident = content.parse()?;
                content.parse::<Token![,]>()?;
                Ok((first, content.parse()?))
            })();
            let (a, b) = names
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .unwrap_or_else(|_| ("a".to_owned(), "b".to_owned()));
            return Err(input.error(format!(
                "`swap({a}, {b});` here would exchange buffers inside one step: it ends a `while` \
                 or `do ... while` body (the next iteration runs with them exchanged); to \
                 exchange them between steps, declare `swap({a}, {b});` beside the stages and \
                 call `graph.swap_{a}_{b}()`"
            )));
        }
        if let Some(message) = misplaced_item(input) {
            return Err(input.error(message));
        }
        // Peeked through the lookahead, so an error below lists them with the statements.
        let lookahead = input.lookahead1();
        if lookahead.peek(Token![while])
            || lookahead.peek(Token![if])
            || lookahead.peek(Token![do])
            || lookahead.peek(kw::switch)
        {
            return Ok(Statement::Control(Box::new(input.parse()?)));
        }
        if let Some((word, _)) = input.cursor().ident()
            && NOT_CAPTURABLE.iter().any(|symbol| word == *symbol)
        {
            return parse_not_capturable(input).map(Statement::NotCapturable);
        }
        let statement = if lookahead.peek(kw::launch) {
            Statement::Launch(Box::new(input.call(parse_launch)?))
        } else if lookahead.peek(kw::copy) {
            let keyword = input.parse()?;
            let src_ref = input.call(parse_buffer_ref)?;
            input.parse::<Token![->]>()?;
            let dst_ref = input.call(parse_buffer_ref)?;
            Statement::Copy(Box::new(Copy {
                keyword,
                src: src_ref.name.clone(),
                src_ref,
                dst: dst_ref.name.clone(),
                dst_ref,
            }))
        } else if lookahead.peek(kw::fill) {
            let keyword = input.parse()?;
            let dst_ref = input.call(parse_buffer_ref)?;
            input.parse::<Token![=]>()?;
            let value = input.parse()?;
            Statement::Fill(Box::new(Fill {
                keyword,
                dst: dst_ref.name.clone(),
                dst_ref,
                value,
            }))
        } else if lookahead.peek(kw::wait) {
            Statement::Wait(input.call(parse_wait)?)
        } else if lookahead.peek(kw::write) {
            let keyword = input.parse()?;
            let flag = input.parse()?;
            input.parse::<Token![=]>()?;
            let value = input.parse()?;
            Statement::Write(Write {
                keyword,
                flag,
                value,
            })
        } else if lookahead.peek(kw::host) {
            let keyword = input.parse()?;
            let closure = input.parse()?;
            let accesses = input.call(parse_accesses)?;
            Statement::Host(Host {
                keyword,
                closure,
                accesses,
            })
        } else if lookahead.peek(kw::call) {
            let keyword = input.parse()?;
            let call = input.call(parse_call)?;
            let accesses = input.call(parse_accesses)?;
            Statement::Call(Call {
                keyword,
                call,
                accesses,
            })
        } else if collective::peek(&lookahead) {
            Statement::Comm(Box::new(input.parse()?))
        } else {
            return Err(lookahead.error());
        };
        input.parse::<Token![;]>()?;
        Ok(statement)
    }
}

/// What to write instead when a statement begins with a word of the pipeline's outline
/// (`stage`, `after`, `for`): each has its place beside the stages, not inside one's body
/// or a branch of it.
fn misplaced_item(input: ParseStream<'_>) -> Option<&'static str> {
    if input.peek(kw::after) {
        Some(
            "`after` goes in a stage's header, before its `{`: `stage solve on main after \
             first { ... }` (the whole stage, its branches and loops included, then runs after \
             `first`)",
        )
    } else if input.peek(kw::stage) {
        Some(
            "a stage holds statements, not stages: declare `stage inner on side { ... }` \
             beside this one (after its closing `}`); for work on another stream under a \
             device condition, give that stage its own `if` on the same buffer",
        )
    } else if input.peek(Token![for]) {
        Some(
            "a pipeline `for` repeats stages and sits beside them: `for i in 0..N { stage \
             work on lane[i] { ... } }`; inside a stage, a device loop is `while cond max N \
             { ... }` or `do { ... } while cond max N;`",
        )
    } else {
        None
    }
}

pub(super) fn parse_not_capturable(input: ParseStream<'_>) -> syn::Result<NotCapturable> {
    let word = input.parse()?;
    let mut rest = TokenStream::new();
    while !input.is_empty() && !input.peek(Token![;]) {
        rest.extend([input.parse::<TokenTree>()?]);
    }
    input.parse::<Token![;]>()?;
    Ok(NotCapturable { word, rest })
}

pub(super) fn parse_launch(input: ParseStream<'_>) -> syn::Result<Launch> {
    let keyword = input.parse()?;
    let path = input.call(Path::parse_mod_style)?;
    let content;
    let paren = parenthesized!(content in input);
    let (args, ranks) = parse_launch_args(&content)?;
    let (mut grid, mut block, mut shared) = (None, None, None);
    let mut peer: Option<PeerClause> = None;
    // One arm per clause; each may appear once, in any order.
    while !input.peek(Token![;]) {
        let lookahead = input.lookahead1();
        if lookahead.peek(kw::peer) {
            let span = input.parse::<kw::peer>()?.span;
            let content;
            parenthesized!(content in input);
            let names = Punctuated::parse_terminated(&content)?;
            if peer.replace(PeerClause { span, names }).is_some() {
                let message =
                    "`peer` set twice in one `launch`; name every buffer in one `peer(..)`";
                return Err(syn::Error::new(span, message));
            }
            continue;
        }
        let (slot, word) = if lookahead.peek(kw::grid) {
            (&mut grid, "grid")
        } else if lookahead.peek(kw::block) {
            (&mut block, "block")
        } else if lookahead.peek(kw::shared) {
            (&mut shared, "shared")
        } else {
            return Err(lookahead.error());
        };
        let span = input.parse::<Ident>()?.span();
        let value = input.call(Expr::parse_without_eager_brace)?;
        if slot.replace(LaunchOption { span, value }).is_some() {
            let message = format!("`{word}` set twice in one `launch`; keep one");
            return Err(syn::Error::new(span, message));
        }
    }
    Ok(Launch {
        keyword,
        path,
        paren,
        args,
        ranks,
        grid,
        block,
        shared,
        peer,
    })
}

/// A launch's arguments, each an expression with `on rank EXPR` after it where it names a
/// neighbour's part of a window.
type LaunchArgs = (Punctuated<Expr, Token![,]>, Vec<Option<OnRank>>);

pub(super) fn parse_launch_args(content: ParseStream<'_>) -> syn::Result<LaunchArgs> {
    let mut args = Punctuated::new();
    let mut ranks = Vec::new();
    while !content.is_empty() {
        args.push_value(content.parse::<Expr>()?);
        ranks.push(if content.peek(kw::on) {
            let on = content.parse()?;
            let rank = content.parse::<kw::rank>().map_err(|e| {
                syn::Error::new(
                    e.span(),
                    "a window argument another rank holds is `w on rank EXPR` (or \
                     `w[lo..hi] on rank EXPR`)",
                )
            })?;
            Some(OnRank {
                on,
                rank,
                expr: content.parse()?,
            })
        } else {
            None
        });
        if content.is_empty() {
            break;
        }
        args.push_punct(content.parse()?);
    }
    Ok((args, ranks))
}

pub(super) fn parse_wait(input: ParseStream<'_>) -> syn::Result<Wait> {
    let keyword = input.parse()?;
    let flag = input.parse()?;
    let lookahead = input.lookahead1();
    let condition = if lookahead.peek(Token![==]) {
        input.parse::<Token![==]>()?;
        WaitCondition::Equal
    } else if lookahead.peek(Token![>=]) {
        input.parse::<Token![>=]>()?;
        WaitCondition::AtLeast
    } else if lookahead.peek(Token![&]) {
        input.parse::<Token![&]>()?;
        WaitCondition::AnyBit
    } else {
        return Err(lookahead.error());
    };
    let value = input.parse()?;
    Ok(Wait {
        keyword,
        flag,
        condition,
        value,
    })
}

pub(super) fn parse_call(input: ParseStream<'_>) -> syn::Result<ExprCall> {
    let expr = input.call(Expr::parse_without_eager_brace)?;
    match ungroup_expr(&expr) {
        Expr::Call(call) => Ok(call.clone()),
        _ => Err(syn::Error::new_spanned(
            &expr,
            "`call` takes a function call, e.g. `call crate::blas::gemv(a, x, y)`",
        )),
    }
}

/// The `reads(...)` / `writes(...)` clauses, each at most once, in either order.
pub(super) fn parse_accesses(input: ParseStream<'_>) -> syn::Result<Accesses> {
    let mut accesses = Accesses::default();
    while !input.peek(Token![;]) {
        let lookahead = input.lookahead1();
        let (slot, word) = if lookahead.peek(kw::reads) {
            (&mut accesses.reads, "reads")
        } else if lookahead.peek(kw::writes) {
            (&mut accesses.writes, "writes")
        } else {
            return Err(lookahead.error());
        };
        let span = input.parse::<Ident>()?.span();
        let content;
        parenthesized!(content in input);
        let mut names = Punctuated::new();
        while !content.is_empty() {
            names.push_value(content.parse()?);
            if content.peek(token::Bracket) {
                return Err(content.error(format!(
                    "`{word}(...)` lists whole buffer params; a `call` cannot take an element \
                     or a range of one: pass the element to a `launch` or `copy` instead, or \
                     make it a buffer param of its own"
                )));
            }
            if content.is_empty() {
                break;
            }
            names.push_punct(content.parse()?);
        }
        if slot.replace(AccessList { span, names }).is_some() {
            let message = format!("`{word}(...)` given twice; list every buffer in one");
            return Err(syn::Error::new(span, message));
        }
    }
    Ok(accesses)
}
