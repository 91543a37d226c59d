"""Word lists the story generator draws from. All written for this project; edit freely.

Each hero is (name, kind, pronoun set). Objects carry their own adjectives so sentences stay sensible.
"""

from __future__ import annotations

from typing import NamedTuple


class Pronouns(NamedTuple):
    """Subject, object and possessive forms: she/her/her, he/him/his, they/them/their."""

    subj: str
    obj: str
    poss: str


SHE = Pronouns("she", "her", "her")
HE = Pronouns("he", "him", "his")
THEY = Pronouns("they", "them", "their")

GIRL_NAMES = (
    "Lily",
    "Mia",
    "Sara",
    "Anna",
    "Zoe",
    "Ella",
    "Nora",
    "Ruby",
    "Lucy",
    "Maya",
    "Ivy",
    "Rosa",
    "Hana",
    "Amara",
    "Lena",
    "Tia",
    "Clara",
    "June",
    "Pia",
    "Olive",
    "Ada",
    "Mina",
    "Leila",
    "Freya",
)
BOY_NAMES = (
    "Tom",
    "Ben",
    "Sam",
    "Leo",
    "Max",
    "Finn",
    "Jack",
    "Omar",
    "Theo",
    "Kai",
    "Noah",
    "Eli",
    "Milo",
    "Ravi",
    "Hugo",
    "Jonah",
    "Arlo",
    "Ezra",
    "Tariq",
    "Felix",
    "Luca",
    "Ike",
    "Otis",
    "Dev",
)
ANIMAL_NAMES = (
    "Pip",
    "Bumble",
    "Coco",
    "Nibbles",
    "Pepper",
    "Biscuit",
    "Dot",
    "Whiskers",
    "Bramble",
    "Puddle",
    "Sunny",
    "Twig",
    "Maple",
    "Pebble",
    "Fizz",
    "Clover",
    "Socks",
    "Button",
    "Hazel",
    "Bean",
)
ANIMAL_KINDS = (
    "cat",
    "dog",
    "rabbit",
    "bear",
    "fox",
    "mouse",
    "duck",
    "owl",
    "frog",
    "turtle",
    "squirrel",
    "hedgehog",
    "pony",
    "lamb",
    "goat",
    "penguin",
    "kitten",
    "puppy",
    "bird",
    "little dragon",
    "robot",
    "snail",
    "bee",
    "otter",
)
CHILD_KINDS = ("girl", "boy")

FRIEND_TRAITS = (
    "kind",
    "shy",
    "brave",
    "silly",
    "quiet",
    "cheerful",
    "curious",
    "clever",
    "gentle",
    "busy",
    "sleepy",
    "funny",
    "careful",
    "happy",
    "small",
    "friendly",
)

PLACES = (
    ("the park", "in"),
    ("the garden", "in"),
    ("the forest", "in"),
    ("the beach", "at"),
    ("the farm", "on"),
    ("the school", "at"),
    ("the library", "in"),
    ("the kitchen", "in"),
    ("the meadow", "in"),
    ("the pond", "by"),
    ("the hill", "on"),
    ("the river", "by"),
    ("the town square", "in"),
    ("the zoo", "at"),
    ("the market", "at"),
    ("the playground", "at"),
    ("the big tree", "under"),
    ("the old barn", "in"),
    ("the bakery", "at"),
    ("the lake", "by"),
    ("the castle", "in"),
    ("the cave", "in"),
    ("the backyard", "in"),
    ("the snowy field", "in"),
    ("the train station", "at"),
    ("the museum", "at"),
    ("the boat", "on"),
    ("the bridge", "on"),
)

# (noun, adjectives that fit it)
OBJECTS = (
    ("ball", ("red", "bouncy", "blue", "shiny", "striped")),
    ("kite", ("yellow", "long", "colorful", "paper", "green")),
    ("teddy bear", ("soft", "brown", "fluffy", "old", "tiny")),
    ("hat", ("funny", "big", "purple", "warm", "pointy")),
    ("book", ("thick", "new", "picture", "old", "magic")),
    ("toy car", ("fast", "little", "red", "wooden", "shiny")),
    ("drum", ("loud", "small", "round", "green", "noisy")),
    ("cup", ("pink", "chipped", "tiny", "blue", "tall")),
    ("shell", ("pretty", "white", "spotted", "pink", "smooth")),
    ("box", ("secret", "wooden", "heavy", "small", "golden")),
    ("crayon", ("orange", "broken", "purple", "bright", "new")),
    ("blanket", ("warm", "soft", "striped", "cozy", "old")),
    ("boat", ("toy", "paper", "little", "wooden", "blue")),
    ("flower", ("yellow", "tall", "pretty", "red", "tiny")),
    ("cookie", ("big", "sweet", "warm", "round", "crunchy")),
    ("key", ("silver", "rusty", "tiny", "golden", "old")),
    ("map", ("torn", "old", "folded", "secret", "big")),
    ("bell", ("silver", "little", "shiny", "loud", "golden")),
    ("scarf", ("long", "woolly", "green", "red", "soft")),
    ("balloon", ("red", "big", "round", "blue", "shiny")),
    ("lantern", ("small", "bright", "paper", "old", "glowing")),
    ("stone", ("smooth", "gray", "round", "sparkly", "flat")),
    ("feather", ("long", "white", "soft", "bright", "blue")),
    ("puzzle", ("hard", "big", "new", "wooden", "colorful")),
    ("sandwich", ("big", "tasty", "cheese", "jam", "small")),
    ("umbrella", ("yellow", "big", "spotted", "black", "tiny")),
)

FOODS = (
    "apples",
    "soup",
    "pancakes",
    "berries",
    "bread",
    "carrots",
    "cake",
    "rice",
    "pie",
    "cheese",
    "honey",
    "noodles",
    "pears",
    "muffins",
    "plums",
    "corn",
)

WEATHER = (
    "sunny",
    "windy",
    "rainy",
    "snowy",
    "cloudy",
    "warm",
    "cold",
    "bright",
    "foggy",
    "quiet",
)
TIMES = (
    "One morning",
    "One day",
    "One afternoon",
    "One evening",
    "Once upon a time",
    "Last summer",
    "One winter day",
    "Early one morning",
    "On a spring day",
    "One night",
    "After lunch one day",
    "On a Saturday",
)

HAPPY_FEELINGS = ("happy", "glad", "proud", "excited", "joyful", "calm", "thankful", "cheerful")
SAD_FEELINGS = ("sad", "worried", "scared", "lonely", "upset", "nervous", "grumpy", "confused")

ACTIVITIES = (
    "play tag",
    "build a sand castle",
    "draw pictures",
    "sing songs",
    "look for bugs",
    "fly a kite",
    "plant seeds",
    "bake a cake",
    "read a story",
    "jump in puddles",
    "count stars",
    "pick berries",
    "make a fort",
    "play hide and seek",
    "paint a fence",
    "feed the ducks",
    "ride bikes",
    "collect leaves",
    "climb a little tree",
    "splash in the water",
)

SOUNDS = (
    "a loud bang",
    "a soft whistle",
    "a tiny squeak",
    "a big splash",
    "a strange buzz",
    "a gentle knock",
    "a happy bark",
    "a low rumble",
    "a sweet song",
    "a funny honk",
)

HELPERS_SAY = (
    "Do not worry",
    "I can help",
    "We can do it together",
    "Let us try again",
    "You are not alone",
    "It will be all right",
    "Let me see",
    "I know what to do",
)

LESSONS = (
    "that friends help each other",
    "that it is good to share",
    "that being brave does not mean you are not scared",
    "that saying sorry can fix a lot",
    "that trying again is how you learn",
    "that kind words make everyone feel better",
    "that it is fun to work together",
    "that asking for help is a smart thing to do",
    "that small things can make a big difference",
    "that patience pays off",
    "that new friends can be found anywhere",
    "that telling the truth is the right thing to do",
)

SKILLS = (
    ("ride a bike", "rode the bike all the way to the gate"),
    ("tie shoes", "tied both shoes with a neat bow"),
    ("whistle", "made a clear, high whistle"),
    ("swim", "swam across the little pool"),
    ("read a long word", "read the long word out loud"),
    ("jump rope", "jumped ten times without stopping"),
    ("bake bread", "baked a round, golden loaf"),
    ("build a birdhouse", "built a birdhouse with a red roof"),
    ("catch a ball", "caught the ball with both hands"),
    ("play the flute", "played a short, happy tune"),
)

SCARY_THINGS = ("the dark", "the deep water", "the big dog", "the thunder", "the tall slide", "the loud wind")

HIDING_SPOTS = ("under a leaf", "in the grass", "behind a rock", "near the water")

TRY_COUNTS = ("two", "three", "four", "five", "many")

TRIP_SIGHTS = (
    "a big red bird",
    "a tiny snail",
    "a rainbow",
    "a boat with a white sail",
    "a field of flowers",
    "a sleepy cow",
    "a tall tower",
    "a little waterfall",
    "three baby ducks",
    "a funny cloud",
)
