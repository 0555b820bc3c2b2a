module lockproxy/clients/go

go 1.19

require github.com/gomodule/redigo v1.8.3

// Debian's golang-github-gomodule-redigo-dev; drop this line to use the
// module proxy instead.
replace github.com/gomodule/redigo => /usr/share/gocode/src/github.com/gomodule/redigo
