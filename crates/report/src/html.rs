//! The report page: plain HTML with inline styles and inline SVG; nothing is fetched.

use crate::chart::escape;
use crate::{Mark, Report, Section};
use std::fmt::Write as _;

const STYLE: &str = "body{font-family:'DejaVu Sans',Verdana,sans-serif;margin:0 auto;max-width:1000px;padding:16px;color:#222}\
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;font-size:13px;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 7px;text-align:right}\
td:first-child,th:first-child{text-align:left}th{background:#f4f4f4}.good{background:#e3f4e3}.bad{background:#fbe1e1}\
dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px;font-size:13px}dt{font-weight:bold}dd{margin:0}\
figure{margin:12px 0}figcaption{font-size:12px;color:#555}svg{max-width:100%;height:auto}nav{font-size:13px}";

/// The SVG without its XML namespace attribute (implied inside HTML), so that the page holds no
/// URL at all.
fn inline(svg: &str) -> String {
    svg.replacen(r#" xmlns="http://www.w3.org/2000/svg""#, "", 1)
}

/// The whole page.
pub fn page(report: &Report) -> String {
    let mut out = String::with_capacity(64 * 1024);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{}</title><style>{STYLE}</style></head><body><h1>{}</h1><dl>",
        escape(&report.title),
        escape(&report.title)
    );
    for (key, value) in &report.facts {
        let _ = write!(out, "<dt>{}</dt><dd>{}</dd>", escape(key), escape(value));
    }
    out.push_str("</dl><nav>");
    let headings: Vec<&String> = report
        .sections
        .iter()
        .filter_map(|s| {
            if let Section::Heading(h) = s {
                Some(h)
            } else {
                None
            }
        })
        .collect();
    for (i, h) in headings.iter().enumerate() {
        let _ = write!(
            out,
            "{}<a href=\"#s{i}\">{}</a>",
            if i > 0 { " · " } else { "" },
            escape(h)
        );
    }
    out.push_str("</nav>\n");
    let mut heading = 0;
    for section in &report.sections {
        match section {
            Section::Heading(h) => {
                let _ = writeln!(out, "<h2 id=\"s{heading}\">{}</h2>", escape(h));
                heading += 1;
            }
            Section::Text(t) => {
                let _ = writeln!(out, "<p>{}</p>", escape(t));
            }
            Section::Table(table) => {
                out.push_str("<table><thead><tr>");
                for h in &table.head {
                    let _ = write!(out, "<th>{}</th>", escape(h));
                }
                out.push_str("</tr></thead><tbody>");
                for row in &table.rows {
                    out.push_str("<tr>");
                    for (cell, mark) in row {
                        let class = match mark {
                            Mark::None => "",
                            Mark::Good => " class=\"good\"",
                            Mark::Bad => " class=\"bad\"",
                        };
                        let _ = write!(out, "<td{class}>{}</td>", escape(cell));
                    }
                    out.push_str("</tr>");
                }
                out.push_str("</tbody></table>\n");
            }
            Section::Figure(f) => {
                let _ = writeln!(
                    out,
                    "<figure id=\"{0}\">{1}<figcaption>figures/{0}.svg · <a href=\"figures/{0}.png\">PNG</a> · <a href=\"figures/{0}.svg\">SVG</a></figcaption></figure>",
                    f.id,
                    inline(&f.svg)
                );
            }
        }
    }
    out.push_str("</body></html>\n");
    out
}
