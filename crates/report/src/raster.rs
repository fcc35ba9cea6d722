//! SVG to PNG, for papers and slides: resvg (the maintained pure-Rust SVG renderer) with the
//! DejaVu Sans font embedded, so a PNG looks the same on a machine without any fonts installed.

use std::sync::{Arc, OnceLock};

/// Why a figure could not be rasterized.
#[derive(Debug, thiserror::Error)]
pub enum RasterError {
    /// The SVG did not parse (a bug in the chart writer).
    #[error("parsing the SVG: {0}")]
    Parse(String),
    /// The PNG could not be encoded.
    #[error("encoding the PNG: {0}")]
    Encode(String),
    /// A zero-sized image.
    #[error("the figure has no size")]
    Empty,
}

/// The font database, loaded once: DejaVu Sans only (no system fonts are read).
fn fonts() -> Arc<resvg::usvg::fontdb::Database> {
    static FONTS: OnceLock<Arc<resvg::usvg::fontdb::Database>> = OnceLock::new();
    FONTS
        .get_or_init(|| {
            let mut db = resvg::usvg::fontdb::Database::new();
            db.load_font_data(dejavu::sans::regular().to_vec());
            db.load_font_data(dejavu::sans::bold().to_vec());
            db.set_sans_serif_family("DejaVu Sans");
            Arc::new(db)
        })
        .clone()
}

/// Renders `svg` to a PNG at `scale` × its size (2 for print-quality figures).
pub fn png(svg: &str, scale: f32) -> Result<Vec<u8>, RasterError> {
    let options = resvg::usvg::Options {
        font_family: "DejaVu Sans".into(),
        fontdb: fonts(),
        ..Default::default()
    };
    let tree = resvg::usvg::Tree::from_str(svg, &options)
        .map_err(|e| RasterError::Parse(e.to_string()))?;
    let size = tree
        .size()
        .to_int_size()
        .scale_by(scale)
        .ok_or(RasterError::Empty)?;
    let mut pixmap =
        resvg::tiny_skia::Pixmap::new(size.width(), size.height()).ok_or(RasterError::Empty)?;
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::from_scale(scale, scale),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| RasterError::Encode(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_text_with_the_embedded_font() {
        let blank = r#"<svg xmlns="http://www.w3.org/2000/svg" width="60" height="20"><rect width="60" height="20" fill="white"/></svg>"#;
        let text = r#"<svg xmlns="http://www.w3.org/2000/svg" width="60" height="20"><rect width="60" height="20" fill="white"/><text x="2" y="15" font-family="DejaVu Sans">JCT</text></svg>"#;
        let (blank, text) = (
            png(blank, 1.0).expect("renders"),
            png(text, 1.0).expect("renders"),
        );
        assert!(text.starts_with(b"\x89PNG"));
        // The glyphs are drawn: the image with text is not the blank one.
        assert_ne!(blank, text);
        assert!(matches!(png("<svg", 1.0), Err(RasterError::Parse(_))));
    }
}
