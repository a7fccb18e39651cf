"""The scenario language: YAML text in, validated frozen `Scenario` dataclasses out.

`yaml_lines` reads the text keeping lines, `fields` gives located access, `shapes` and
`step_shapes` declare the vocabulary, the `parse_*` modules validate each section, `loader`
puts them together, `schema` holds the dataclasses and `json_schema` renders the format for
editors. `errors.InvalidScenario` is the one error bad input raises. Nothing here runs a story.
"""

__all__: list[str] = []
