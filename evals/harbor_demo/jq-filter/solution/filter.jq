# The MIT-licensed packages' names, largest first.
[.[] | select(.license == "MIT")] | sort_by(-.size_kb) | map(.name)
