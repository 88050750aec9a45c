//! The DOT text of known pipelines.

use super::*;

#[test]
fn heat_step_renders_its_streams_waits_and_join() {
    let expected = r#"digraph HeatStep {
    node [shape=box];
    subgraph cluster_compute {
        label = "compute";
        "(start)" [shape=circle];
        "step";
        "clear";
        "(end)" [shape=doublecircle];
        "(start)" -> "step" -> "clear" -> "(end)" [style=dotted];
    }
    subgraph cluster_copy {
        label = "copy";
        "save";
        "publish";
        "save" -> "publish" [style=dotted];
    }
    "step" -> "save" [label="RAW next"];
    "clear" -> "publish" [label="after"];
    "publish" -> "(end)" [label="join"];
}
"#;
    assert_eq!(lower_ok(HEAT).dot(), expected);
}

#[test]
fn forks_and_multi_reason_waits_render() {
    let source = "pipeline Split {
        streams { main, side }
        params { x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage load on side { call load() writes(x) reads(y); }
        stage use_ on main { call consume() reads(x) writes(y); }
    }";
    let expected = r#"digraph Split {
    node [shape=box];
    subgraph cluster_main {
        label = "main";
        "(start)" [shape=circle];
        "use_";
        "(end)" [shape=doublecircle];
        "(start)" -> "use_" -> "(end)" [style=dotted];
    }
    subgraph cluster_side {
        label = "side";
        "load";
    }
    "load" -> "use_" [label="RAW x, WAR y"];
    "(start)" -> "load" [label="fork"];
}
"#;
    assert_eq!(lower_ok(source).dot(), expected);
}
