//! A tiny JSON reader for the matching fixtures (test only): numbers keep their text, so
//! weights go through Rust's correctly rounded `f64` parser and compare bit for bit.

/// Just enough JSON for the fixture (objects, arrays, plain strings, numbers); numbers keep
/// their text so weights are parsed by Rust's correctly rounded `f64` parser.
#[derive(Debug)]
pub(super) enum Json {
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

struct Parser<'a> {
    text: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.at < self.text.len() && self.text[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) {
        self.skip_ws();
        assert_eq!(
            self.text.get(self.at),
            Some(&byte),
            "fixture: expected {:?} at {}",
            byte as char,
            self.at
        );
        self.at += 1;
    }

    fn string(&mut self) -> String {
        self.eat(b'"');
        let start = self.at;
        while self.text[self.at] != b'"' {
            assert_ne!(
                self.text[self.at], b'\\',
                "fixture: escapes are not supported"
            );
            self.at += 1;
        }
        self.at += 1;
        String::from_utf8_lossy(&self.text[start..self.at - 1]).into_owned()
    }

    fn value(&mut self) -> Json {
        self.skip_ws();
        match self.text[self.at] {
            b'"' => Json::Str(self.string()),
            b'[' => {
                self.at += 1;
                let mut items = Vec::new();
                self.skip_ws();
                if self.text[self.at] == b']' {
                    self.at += 1;
                    return Json::Arr(items);
                }
                loop {
                    items.push(self.value());
                    self.skip_ws();
                    self.at += 1;
                    if self.text[self.at - 1] == b']' {
                        return Json::Arr(items);
                    }
                }
            }
            b'{' => {
                self.at += 1;
                let mut fields = Vec::new();
                loop {
                    let key = self.string();
                    self.eat(b':');
                    fields.push((key, self.value()));
                    self.skip_ws();
                    self.at += 1;
                    if self.text[self.at - 1] == b'}' {
                        return Json::Obj(fields);
                    }
                }
            }
            _ => {
                let start = self.at;
                while self.at < self.text.len() && b"+-.eE0123456789".contains(&self.text[self.at])
                {
                    self.at += 1;
                }
                Json::Num(String::from_utf8_lossy(&self.text[start..self.at]).into_owned())
            }
        }
    }
}

impl Json {
    pub(super) fn find(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => panic!("not an object"),
        }
    }
    pub(super) fn get(&self, key: &str) -> &Json {
        self.find(key).unwrap_or_else(|| panic!("no field {key}"))
    }
    pub(super) fn items(&self) -> &[Json] {
        match self {
            Json::Arr(items) => items,
            _ => panic!("not an array"),
        }
    }
    pub(super) fn num(&self) -> f64 {
        match self {
            Json::Num(text) => text.parse().unwrap_or_else(|_| panic!("bad number {text}")),
            _ => panic!("not a number"),
        }
    }
    pub(super) fn int(&self) -> i64 {
        match self {
            Json::Num(text) => text
                .parse()
                .unwrap_or_else(|_| panic!("bad integer {text}")),
            _ => panic!("not a number"),
        }
    }
    pub(super) fn str(&self) -> &str {
        match self {
            Json::Str(s) => s,
            _ => panic!("not a string"),
        }
    }
}

/// Parses a fixture.
pub(super) fn parse(text: &str) -> Json {
    Parser {
        text: text.as_bytes(),
        at: 0,
    }
    .value()
}
